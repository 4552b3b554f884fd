package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// serveCode runs the code context operations (docs/AGENT_PROTOCOL.md,
// "Code contexts").
func (a *Agent) serveCode(ctx context.Context, s io.ReadWriteCloser, w *frameWriter, payload []byte) {
	var req agentproto.CodeRequest
	if err := json.Unmarshal(payload, &req); err != nil {
		w.fail(fmt.Errorf("code: decode request: %w: %w", err, errdefs.ErrInvalidArgument))
		return
	}
	switch req.Op {
	case agentproto.OpContextCreate:
		set, err := settingsOf(req)
		if err != nil {
			w.fail(err)
			return
		}
		c, err := a.code.create(a, newContextID(), false, set)
		if err != nil {
			w.fail(err)
			return
		}
		info := c.info()
		w.replyJSON(agentproto.ContextReply{Context: &info})
	case agentproto.OpContextList:
		w.replyJSON(agentproto.ContextReply{Contexts: a.code.list()})
	case agentproto.OpContextRestart:
		c, err := a.code.get(req.ContextID)
		if err == nil {
			err = c.restart(a)
		}
		if err != nil {
			w.fail(err)
			return
		}
		info := c.info()
		w.replyJSON(agentproto.ContextReply{Context: &info})
	case agentproto.OpContextDelete:
		if err := a.code.remove(req.ContextID); err != nil {
			w.fail(err)
			return
		}
		w.replyJSON(agentproto.ContextReply{})
	case agentproto.OpCodeRun:
		a.runCode(ctx, s, w, req)
	default:
		w.fail(fmt.Errorf("unknown op %q: %w", req.Op, errdefs.ErrInvalidArgument))
	}
}

// settingsOf reads a new context's settings from a request. The
// language's defaults come before the request's env, which may override
// them.
func settingsOf(req agentproto.CodeRequest) (contextSettings, error) {
	name := req.Language
	if name == "" {
		name = api.LanguagePython
	}
	lang, err := lookupLanguage(name)
	if err != nil {
		return contextSettings{}, err
	}
	env := append(append([]string(nil), lang.env...), req.Env...)
	return contextSettings{lang: lang, user: req.User, cwd: req.Cwd, env: env}, nil
}

// runCode runs code in a context, streaming its output, and ends with the
// run's CodeEnd. A stream closed by the daemon interrupts the run.
func (a *Agent) runCode(ctx context.Context, s io.ReadWriteCloser, w *frameWriter, req agentproto.CodeRequest) {
	c, err := a.codeContextFor(req)
	if err != nil {
		w.fail(err)
		return
	}
	cmd, err := c.settings.lang.encode(req.Code, req.RunEnv)
	if err != nil {
		w.fail(err)
		return
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		// The daemon sends nothing more: a failed read means it closed
		// the stream (the client went away) or the session ended.
		for {
			if _, err := agentproto.ReadFrame(s); err != nil {
				cancel()
				return
			}
		}
	}()
	if err := c.acquire(runCtx); err != nil {
		w.fail(fmt.Errorf("code: waiting for the context's previous run: %w", err))
		return
	}
	defer c.releaseSlot()
	ip, restarted, err := c.interpreter(a)
	if err != nil {
		w.fail(err)
		return
	}
	info := c.info()
	if err := w.replyJSON(agentproto.CodeRunReply{Context: &info}); err != nil {
		return
	}
	end := c.execute(runCtx, ip, w, cmd, req.TimeoutMS)
	end.ContextRestarted = restarted
	w.replyJSON(agentproto.CodeRunReply{End: &end})
}

// codeContextFor finds the context a run names, or the default context of
// its language (created on first use with the request's settings).
func (a *Agent) codeContextFor(req agentproto.CodeRequest) (*codeContext, error) {
	if req.ContextID != "" {
		c, err := a.code.get(req.ContextID)
		if err != nil {
			return nil, err
		}
		if req.Language != "" && req.Language != c.settings.lang.name {
			return nil, fmt.Errorf("code: context %s runs %s, not %s: %w",
				c.id, c.settings.lang.name, req.Language, errdefs.ErrInvalidArgument)
		}
		return c, nil
	}
	set, err := settingsOf(req)
	if err != nil {
		return nil, err
	}
	return a.code.defaultFor(a, set)
}
