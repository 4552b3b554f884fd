package server

import (
	"fmt"
	"net/http"
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
		return "", end, err
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

// codeFunc runs the code; created is as for execFunc.
type codeFunc func(sandbox.CodeIO) (created string, end agentproto.CodeEnd, err error)

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
		created, end, err := run(sandbox.CodeIO{CodeIO: agentproto.CodeIO{
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
		if created != "" {
			return writeJSON(w, http.StatusOK, api.RunCodeResult{SandboxID: created, CodeResult: res})
		}
		return writeJSON(w, http.StatusOK, res)
	}

	es := &eventStream[api.CodeEvent]{w: w, format: format,
		data: func(typ string, p []byte) api.CodeEvent { return api.CodeEvent{Type: typ, Data: p} },
		name: func(ev api.CodeEvent) string { return ev.Type },
	}
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
