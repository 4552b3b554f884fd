package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"time"

	"github.com/airlockdev/airlock/api"
)

// CodeOption configures RunCode.
type CodeOption func(*codeOptions)

type codeOptions struct {
	req      api.RunCodeRequest
	onStdout func([]byte)
	onStderr func([]byte)
	onResult func(api.CodeOutput)
}

func (o *codeOptions) streaming() bool {
	return o.onStdout != nil || o.onStderr != nil || o.onResult != nil
}

// WithLanguage runs the code in the default context of lang
// (api.LanguagePython, the default, api.LanguageJavaScript or
// api.LanguageBash).
func WithLanguage(lang string) CodeOption {
	return func(o *codeOptions) { o.req.Language = lang }
}

// InContext runs the code in the context with this id (see CreateContext).
func InContext(id string) CodeOption {
	return func(o *codeOptions) { o.req.ContextID = id }
}

// WithCodeTimeout interrupts the code after d; the context keeps its
// earlier state. Default: the daemon's exec timeout.
func WithCodeTimeout(d time.Duration) CodeOption {
	return func(o *codeOptions) { o.req.TimeoutSeconds = d.Seconds() }
}

// WithCodeEnv sets environment variables for this run only.
func WithCodeEnv(env map[string]string) CodeOption {
	return func(o *codeOptions) { o.req.Env = env }
}

// OnStdout streams the run and calls fn with each chunk of standard
// output as it is produced.
func OnStdout(fn func(chunk []byte)) CodeOption {
	return func(o *codeOptions) { o.onStdout = fn }
}

// OnStderr streams the run and calls fn with each chunk of standard error.
func OnStderr(fn func(chunk []byte)) CodeOption {
	return func(o *codeOptions) { o.onStderr = fn }
}

// OnResult streams the run and calls fn with each rich output (a figure,
// the last expression's value) as it is produced.
func OnResult(fn func(api.CodeOutput)) CodeOption {
	return func(o *codeOptions) { o.onResult = fn }
}

func newCodeOptions(code string, opts []CodeOption) *codeOptions {
	o := &codeOptions{req: api.RunCodeRequest{Code: code}}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// RunCode runs code in a code context of the sandbox (by default the
// Python context, created on first use) and returns its outputs. An error
// the code raised, a timeout or a lost context is not a Go error: see
// Error, TimedOut and ContextLost in the result.
//
// With OnStdout, OnStderr or OnResult the run is streamed to the
// callbacks as it happens; the result then still holds all of the output.
// Without them the daemon buffers the run and caps stdout and stderr at
// 1 MiB each.
func (s *Sandbox) RunCode(ctx context.Context, code string, opts ...CodeOption) (*api.CodeResult, error) {
	p, err := sandboxPath(s.ID, "/code")
	if err != nil {
		return nil, err
	}
	o := newCodeOptions(code, opts)
	if !o.streaming() {
		var res api.CodeResult
		if err := s.c.doJSON(ctx, http.MethodPost, p, nil, o.req, &res); err != nil {
			return nil, err
		}
		return &res, nil
	}
	_, res, err := s.c.streamCode(ctx, p, o.req, o)
	return res, err
}

// RunCode creates a sandbox (zero fields of sb take the daemon's
// defaults), runs code in it like Sandbox.RunCode and deletes it.
func (c *Client) RunCode(ctx context.Context, sb api.CreateSandboxRequest, code string, opts ...CodeOption) (*api.RunCodeResult, error) {
	o := newCodeOptions(code, opts)
	req := api.RunRequest{Sandbox: sb, Code: &o.req}
	if !o.streaming() {
		var res api.RunCodeResult
		if err := c.doJSON(ctx, http.MethodPost, "/v1/run", nil, req, &res); err != nil {
			return nil, err
		}
		return &res, nil
	}
	id, res, err := c.streamCode(ctx, "/v1/run", req, o)
	if err != nil {
		return nil, err
	}
	return &api.RunCodeResult{SandboxID: id, CodeResult: *res}, nil
}

// streamCode posts a run asking for NDJSON events, dispatches them to the
// callbacks and assembles the full result.
func (c *Client) streamCode(ctx context.Context, path string, in any, o *codeOptions) (string, *api.CodeResult, error) {
	resp, err := c.postStream(ctx, path, in)
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
		return replayCode(resp.Body, o)
	}

	var sandboxID string
	var stdout, stderr bytes.Buffer
	results := []api.CodeOutput{}
	dec := json.NewDecoder(resp.Body)
	for {
		var ev api.CodeEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return sandboxID, nil, fmt.Errorf("airlock: code stream ended before the end event: %w", err)
		}
		switch ev.Type {
		case api.EventStart:
			if ev.SandboxID != "" {
				sandboxID = ev.SandboxID
			}
		case api.EventStdout:
			stdout.Write(ev.Data)
			if o.onStdout != nil {
				o.onStdout(ev.Data)
			}
		case api.EventStderr:
			stderr.Write(ev.Data)
			if o.onStderr != nil {
				o.onStderr(ev.Data)
			}
		case api.EventResult:
			if ev.Result != nil {
				results = append(results, *ev.Result)
				if o.onResult != nil {
					o.onResult(*ev.Result)
				}
			}
		case api.EventEnd:
			if ev.End == nil {
				return sandboxID, nil, errors.New("airlock: end event without a result")
			}
			res := ev.End
			res.Stdout, res.Stderr, res.Results = stdout.String(), stderr.String(), results
			return sandboxID, res, nil
		case api.EventFailure:
			return sandboxID, nil, streamError(ev.Failure)
		}
		// The error event repeats what the end event carries; unknown
		// types are skipped, for forward compatibility.
	}
}

// replayCode handles a daemon that answered a streamed run with the
// buffered result: the callbacks still see everything, once.
func replayCode(body io.Reader, o *codeOptions) (string, *api.CodeResult, error) {
	var res api.RunCodeResult
	if err := json.NewDecoder(body).Decode(&res); err != nil {
		return "", nil, fmt.Errorf("airlock: decode code response: %w", err)
	}
	if o.onStdout != nil && res.Stdout != "" {
		o.onStdout([]byte(res.Stdout))
	}
	if o.onStderr != nil && res.Stderr != "" {
		o.onStderr([]byte(res.Stderr))
	}
	if o.onResult != nil {
		for _, r := range res.Results {
			o.onResult(r)
		}
	}
	return res.SandboxID, &res.CodeResult, nil
}

func contextPath(id, ctxID, sub string) (string, error) {
	if ctxID == "" {
		return "", fmt.Errorf("%w: context id is empty", ErrInvalidArgument)
	}
	return sandboxPath(id, "/contexts/"+url.PathEscape(ctxID)+sub)
}

// CreateContext starts a code context: an interpreter whose state
// persists from run to run. Run code in it with RunCode(ctx, code,
// InContext(cc.ID)).
func (s *Sandbox) CreateContext(ctx context.Context, req api.CreateContextRequest) (*api.CodeContext, error) {
	p, err := sandboxPath(s.ID, "/contexts")
	if err != nil {
		return nil, err
	}
	var cc api.CodeContext
	if err := s.c.doJSON(ctx, http.MethodPost, p, nil, req, &cc); err != nil {
		return nil, err
	}
	return &cc, nil
}

// ListContexts lists the sandbox's code contexts.
func (s *Sandbox) ListContexts(ctx context.Context) ([]api.CodeContext, error) {
	p, err := sandboxPath(s.ID, "/contexts")
	if err != nil {
		return nil, err
	}
	var list api.CodeContextList
	if err := s.c.doJSON(ctx, http.MethodGet, p, nil, nil, &list); err != nil {
		return nil, err
	}
	return list.Contexts, nil
}

// RestartContext replaces a context's interpreter with a fresh one; its
// state is gone.
func (s *Sandbox) RestartContext(ctx context.Context, id string) (*api.CodeContext, error) {
	p, err := contextPath(s.ID, id, "/restart")
	if err != nil {
		return nil, err
	}
	var cc api.CodeContext
	if err := s.c.doJSON(ctx, http.MethodPost, p, nil, nil, &cc); err != nil {
		return nil, err
	}
	return &cc, nil
}

// DeleteContext kills a context's interpreter and forgets the context.
func (s *Sandbox) DeleteContext(ctx context.Context, id string) error {
	p, err := contextPath(s.ID, id, "")
	if err != nil {
		return err
	}
	return s.c.doJSON(ctx, http.MethodDelete, p, nil, nil, nil)
}
