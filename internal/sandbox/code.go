package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/agentproto"
)

// maxEncodedCode bounds a run's code as JSON in the agent request frame
// (agentproto.MaxFrame), leaving room for the rest of the request.
const maxEncodedCode = agentproto.MaxFrame - 64<<10

// CodeIO receives a run's output as it is produced.
type CodeIO struct {
	agentproto.CodeIO
	// OnSandbox, if set, is told the id of the sandbox RunCodeOnce created.
	OnSandbox func(id string)
}

// languageAliases maps the accepted spellings to api.Language* names.
var languageAliases = map[string]string{
	"":                     api.LanguagePython,
	api.LanguagePython:     api.LanguagePython,
	"python3":              api.LanguagePython,
	api.LanguageJavaScript: api.LanguageJavaScript,
	"js":                   api.LanguageJavaScript,
	"node":                 api.LanguageJavaScript,
	api.LanguageBash:       api.LanguageBash,
}

// Language resolves a request's language name; empty means python.
func Language(name string) (string, error) {
	l, ok := languageAliases[name]
	if !ok {
		return "", invalid("language must be python, javascript or bash, got %q", name)
	}
	return l, nil
}

// CreateContext starts a code context: an interpreter in the sandbox
// whose state persists from run to run.
func (m *Manager) CreateContext(ctx context.Context, id string, req api.CreateContextRequest) (api.CodeContext, error) {
	sb, err := m.Get(ctx, id)
	if err != nil {
		return api.CodeContext{}, err
	}
	lang, err := Language(req.Language)
	if err != nil {
		return api.CodeContext{}, err
	}
	if req.Cwd != "" && req.Cwd[0] != '/' {
		return api.CodeContext{}, invalid("cwd must be an absolute path, got %q", req.Cwd)
	}
	env, err := envList(sb.Env, req.Env)
	if err != nil {
		return api.CodeContext{}, err
	}
	c, err := m.Agent(ctx, id)
	if err != nil {
		return api.CodeContext{}, err
	}
	return c.CreateContext(ctx, agentproto.CodeRequest{Language: lang, Cwd: req.Cwd, User: req.User, Env: env})
}

// ListContexts lists a sandbox's code contexts.
func (m *Manager) ListContexts(ctx context.Context, id string) ([]api.CodeContext, error) {
	c, err := m.contextAgent(ctx, id, "")
	if err != nil {
		return nil, err
	}
	list, err := c.ListContexts(ctx)
	if list == nil {
		list = []api.CodeContext{}
	}
	return list, err
}

// RestartContext gives a context a fresh interpreter.
func (m *Manager) RestartContext(ctx context.Context, id, contextID string) (api.CodeContext, error) {
	c, err := m.contextAgent(ctx, id, contextID)
	if err != nil {
		return api.CodeContext{}, err
	}
	return c.RestartContext(ctx, contextID)
}

// DeleteContext kills a context's interpreter and forgets the context.
func (m *Manager) DeleteContext(ctx context.Context, id, contextID string) error {
	c, err := m.contextAgent(ctx, id, contextID)
	if err != nil {
		return err
	}
	return c.DeleteContext(ctx, contextID)
}

func (m *Manager) contextAgent(ctx context.Context, id, contextID string) (*agentproto.Client, error) {
	if _, err := m.Get(ctx, id); err != nil {
		return nil, err
	}
	if len(contextID) > 128 {
		return nil, invalid("context id is too long")
	}
	return m.Agent(ctx, id)
}

// RunCode runs code in a context of a sandbox, or in the default context
// of its language, created on first use with the sandbox's environment.
func (m *Manager) RunCode(ctx context.Context, id string, req api.RunCodeRequest, cio CodeIO) (agentproto.CodeEnd, error) {
	sb, err := m.Get(ctx, id)
	if err != nil {
		return agentproto.CodeEnd{}, err
	}
	areq, err := m.codeRequest(sb, req)
	if err != nil {
		return agentproto.CodeEnd{}, err
	}
	c, err := m.Agent(ctx, id)
	if err != nil {
		return agentproto.CodeEnd{}, err
	}
	return c.RunCode(ctx, areq, cio.CodeIO)
}

func (m *Manager) codeRequest(sb api.Sandbox, req api.RunCodeRequest) (agentproto.CodeRequest, error) {
	var lang string
	if req.Language != "" || req.ContextID == "" {
		l, err := Language(req.Language)
		if err != nil {
			return agentproto.CodeRequest{}, err
		}
		lang = l
	}
	if b, _ := json.Marshal(req.Code); len(b) > maxEncodedCode {
		return agentproto.CodeRequest{}, invalid("code is too large: %d bytes as JSON, at most %d", len(b), maxEncodedCode)
	}
	if len(req.ContextID) > 128 {
		return agentproto.CodeRequest{}, invalid("context_id is too long")
	}
	timeout, err := m.runTimeout(req.TimeoutSeconds)
	if err != nil {
		return agentproto.CodeRequest{}, err
	}
	if _, err := envList(nil, req.Env); err != nil {
		return agentproto.CodeRequest{}, err
	}
	// The sandbox's env goes to a default context this run may create.
	env, _ := envList(sb.Env, nil)
	return agentproto.CodeRequest{
		ContextID: req.ContextID, Language: lang, Env: env,
		Code: req.Code, RunEnv: req.Env, TimeoutMS: timeout.Milliseconds(),
	}, nil
}

func (m *Manager) runTimeout(seconds float64) (time.Duration, error) {
	if seconds < 0 {
		return 0, invalid("timeout_seconds must not be negative, got %g", seconds)
	}
	timeout := time.Duration(seconds * float64(time.Second))
	if timeout == 0 {
		timeout = m.cfg.DefaultExecTimeout
	}
	if timeout > m.cfg.MaxTimeout {
		return 0, invalid("timeout_seconds must be at most %d", int64(m.cfg.MaxTimeout/time.Second))
	}
	return timeout, nil
}

// envList validates env and layers it over base as sorted KEY=VALUE.
func envList(base, env map[string]string) ([]string, error) {
	merged := maps.Clone(base)
	if merged == nil {
		merged = map[string]string{}
	}
	for k, v := range env {
		if !envKeyRE.MatchString(k) {
			return nil, invalid("env name %q is not a valid variable name", k)
		}
		merged[k] = v
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(merged)) {
		out = append(out, k+"="+merged[k])
	}
	return out, nil
}

// CodeOutputLimit returns the per-stream cap for a buffered run.
func (m *Manager) CodeOutputLimit(req api.RunCodeRequest) (int64, error) {
	return m.OutputLimit(api.ExecRequest{MaxOutputBytes: req.MaxOutputBytes})
}

// RunCodeOnce creates a sandbox, runs code in its default context and
// deletes it.
func (m *Manager) RunCodeOnce(ctx context.Context, sreq api.CreateSandboxRequest, req api.RunCodeRequest, cio CodeIO) (string, agentproto.CodeEnd, error) {
	if req.ContextID != "" {
		return "", agentproto.CodeEnd{}, invalid("code.context_id does not apply to a one-shot run")
	}
	if _, err := Language(req.Language); err != nil {
		return "", agentproto.CodeEnd{}, err
	}
	timeout, err := m.runTimeout(req.TimeoutSeconds)
	if err != nil {
		return "", agentproto.CodeEnd{}, err
	}
	// The sandbox must outlive the code it was made for.
	if sreq.TimeoutSeconds == 0 {
		if ttl := timeout + time.Minute; ttl > m.cfg.DefaultTimeout {
			sreq.TimeoutSeconds = int64(ttl / time.Second)
		}
	}
	sb, err := m.Create(ctx, sreq)
	if err != nil {
		return "", agentproto.CodeEnd{}, err
	}
	if cio.OnSandbox != nil {
		cio.OnSandbox(sb.ID)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := m.Delete(dctx, sb.ID); err != nil {
			m.log.Error("delete one-shot sandbox", "id", sb.ID, "err", err)
		}
	}()
	end, err := m.RunCode(ctx, sb.ID, req, cio)
	if err != nil {
		return sb.ID, end, fmt.Errorf("run code in %s: %w", sb.ID, err)
	}
	return sb.ID, end, nil
}
