package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
	"github.com/airlockdev/airlock/internal/sandbox"
)

const (
	// maxCodeBody leaves room for code up to the agent's frame size.
	maxCodeBody = 4 << 20
	// maxCodeResults caps the rich outputs a buffered run keeps; past it
	// they are dropped and results_truncated is set.
	maxCodeResults = 64 << 20
)

func (s *Server) createContext(w http.ResponseWriter, r *http.Request) error {
	var req api.CreateContextRequest
	if err := decodeJSON(w, r, maxJSONBody, &req); err != nil {
		return err
	}
	cc, err := s.sandboxes.CreateContext(r.Context(), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, cc)
}

func (s *Server) listContexts(w http.ResponseWriter, r *http.Request) error {
	list, err := s.sandboxes.ListContexts(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.CodeContextList{Contexts: list})
}

func (s *Server) restartContext(w http.ResponseWriter, r *http.Request) error {
	cc, err := s.sandboxes.RestartContext(r.Context(), r.PathValue("id"), r.PathValue("ctx"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, cc)
}

func (s *Server) deleteContext(w http.ResponseWriter, r *http.Request) error {
	if err := s.sandboxes.DeleteContext(r.Context(), r.PathValue("id"), r.PathValue("ctx")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) runCode(w http.ResponseWriter, r *http.Request) error {
	var req api.RunCodeRequest
	if err := decodeJSON(w, r, maxCodeBody, &req); err != nil {
		return err
	}
	id := r.PathValue("id")
	return s.serveCode(w, r, req, func(cio sandbox.CodeIO) (string, agentproto.CodeEnd, error) {
		end, err := s.sandboxes.RunCode(r.Context(), id, req, cio)
		return id, end, err
	})
}

// runCodeOnce serves POST /v1/run with code: a fresh sandbox's default
// context.
func (s *Server) runCodeOnce(w http.ResponseWriter, r *http.Request, req api.RunRequest) error {
	if len(req.Exec.Cmd) > 0 || req.Exec.Shell != "" {
		return fmt.Errorf("%w: set either exec or code, not both", errdefs.ErrInvalidArgument)
	}
	return s.serveCode(w, r, *req.Code, func(cio sandbox.CodeIO) (string, agentproto.CodeEnd, error) {
		return s.sandboxes.RunCodeOnce(r.Context(), req.Sandbox, *req.Code, cio)
	})
}

type codeFunc func(sandbox.CodeIO) (sandboxID string, end agentproto.CodeEnd, err error)

// serveCode answers a run either buffered or as an event stream.
func (s *Server) serveCode(w http.ResponseWriter, r *http.Request, req api.RunCodeRequest, run codeFunc) error {
	format, err := streamFormat(r)
	if err != nil {
		return err
	}
	began := time.Now()
	if format == formatBuffered {
		limit, err := s.sandboxes.CodeOutputLimit(req)
		if err != nil {
			return err
		}
		stdout, stderr := &sandbox.CapBuffer{Limit: limit}, &sandbox.CapBuffer{Limit: limit}
		res := api.CodeResult{Results: []api.CodeOutput{}}
		kept := 0
		id, end, err := run(sandbox.CodeIO{CodeIO: agentproto.CodeIO{
			Stdout: stdout, Stderr: stderr,
			OnContext: func(c api.CodeContext) { res.ContextID = c.ID },
			OnResult: func(o api.CodeOutput) error {
				if n := outputSize(o); kept+n <= maxCodeResults {
					kept += n
					res.Results = append(res.Results, o)
				} else {
					res.ResultsTruncated = true
				}
				return nil
			},
		}})
		if err != nil {
			return err
		}
		fillCodeResult(&res, end, began)
		res.Stdout, res.Stderr = stdout.String(), stderr.String()
		res.StdoutTruncated, res.StderrTruncated = stdout.Truncated, stderr.Truncated
		if r.URL.Path == "/v1/run" {
			return writeJSON(w, http.StatusOK, api.RunCodeResult{SandboxID: id, CodeResult: res})
		}
		return writeJSON(w, http.StatusOK, res)
	}

	es := &codeEvents{w: w, format: format}
	var sandboxID, contextID string
	_, end, err := run(sandbox.CodeIO{
		OnSandbox: func(id string) { sandboxID = id },
		CodeIO: agentproto.CodeIO{
			Stdout: es.writer(api.EventStdout),
			Stderr: es.writer(api.EventStderr),
			OnContext: func(c api.CodeContext) {
				contextID = c.ID
				es.send(api.CodeEvent{Type: api.EventStart, ContextID: c.ID, SandboxID: sandboxID})
			},
			OnResult: func(o api.CodeOutput) error {
				return es.send(api.CodeEvent{Type: api.EventResult, Result: &o})
			},
		},
	})
	if err != nil {
		if !es.started() {
			return err // nothing sent yet: a plain error response
		}
		es.send(api.CodeEvent{Type: api.EventFailure, Failure: errorBody(err)})
		return nil
	}
	if end.Error != nil {
		es.send(api.CodeEvent{Type: api.EventError, Error: end.Error})
	}
	res := api.CodeResult{ContextID: contextID, Results: []api.CodeOutput{}}
	fillCodeResult(&res, end, began)
	es.send(api.CodeEvent{Type: api.EventEnd, End: &res})
	return nil
}

func fillCodeResult(res *api.CodeResult, end agentproto.CodeEnd, began time.Time) {
	res.ExecutionCount = end.ExecutionCount
	res.Error = end.Error
	res.TimedOut, res.ContextLost, res.ContextRestarted = end.TimedOut, end.ContextLost, end.ContextRestarted
	res.DurationMS = float64(time.Since(began).Microseconds()) / 1000
}

func outputSize(o api.CodeOutput) int {
	return len(o.Text) + len(o.HTML) + len(o.Markdown) + len(o.LaTeX) + len(o.SVG) +
		len(o.PNG) + len(o.JPEG) + len(o.JSON) + len(o.JavaScript)
}

// codeEvents writes a run's events as NDJSON lines or SSE events,
// flushing each so clients see output as it is produced.
type codeEvents struct {
	w      http.ResponseWriter
	format string

	mu   sync.Mutex
	sent bool
	err  error
}

func (e *codeEvents) started() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sent
}

func (e *codeEvents) send(ev api.CodeEvent) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return e.err
	}
	if !e.sent {
		ct := "application/x-ndjson"
		if e.format == formatSSE {
			ct = "text/event-stream"
		}
		e.w.Header().Set("Content-Type", ct)
		e.w.Header().Set("Cache-Control", "no-store")
		e.w.Header().Set("X-Accel-Buffering", "no")
		e.w.WriteHeader(http.StatusOK)
		e.sent = true
	}
	b, err := json.Marshal(ev)
	if err != nil {
		e.err = err
		return err
	}
	if e.format == formatSSE {
		_, e.err = fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", ev.Type, b)
	} else {
		_, e.err = e.w.Write(append(b, '\n'))
	}
	if e.err == nil {
		http.NewResponseController(e.w).Flush()
	}
	return e.err
}

func (e *codeEvents) writer(typ string) codeEventWriter { return codeEventWriter{es: e, typ: typ} }

type codeEventWriter struct {
	es  *codeEvents
	typ string
}

func (w codeEventWriter) Write(p []byte) (int, error) {
	if err := w.es.send(api.CodeEvent{Type: w.typ, Data: p}); err != nil {
		return 0, err
	}
	return len(p), nil
}
