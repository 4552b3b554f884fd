package server

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
	"github.com/airlockdev/airlock/internal/sandbox"
)

// Streaming formats of exec and run.
const (
	formatBuffered = ""
	formatNDJSON   = "ndjson"
	formatSSE      = "sse"
)

// streamFormat picks the response format from ?stream= or the Accept header.
func streamFormat(r *http.Request) (string, error) {
	switch f := r.URL.Query().Get("stream"); f {
	case formatNDJSON, formatSSE:
		return f, nil
	case "", "false", "none":
	default:
		return "", fmt.Errorf("%w: stream must be ndjson or sse, got %q", errdefs.ErrInvalidArgument, f)
	}
	accept := r.Header.Get("Accept")
	switch {
	case strings.Contains(accept, "application/x-ndjson"):
		return formatNDJSON, nil
	case strings.Contains(accept, "text/event-stream"):
		return formatSSE, nil
	}
	return formatBuffered, nil
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) error {
	var req api.ExecRequest
	if err := decodeJSON(w, r, maxExecBody, &req); err != nil {
		return err
	}
	id := r.PathValue("id")
	return s.serveExec(w, r, req, func(eio sandbox.ExecIO) (string, agentproto.ExitStatus, error) {
		st, err := s.sandboxes.Exec(r.Context(), id, req, eio)
		return "", st, err
	})
}

func (s *Server) run(w http.ResponseWriter, r *http.Request) error {
	var req api.RunRequest
	if err := decodeJSON(w, r, maxExecBody, &req); err != nil {
		return err
	}
	if req.Code != nil {
		return s.runCodeOnce(w, r, req)
	}
	return s.serveExec(w, r, req.Exec, func(eio sandbox.ExecIO) (string, agentproto.ExitStatus, error) {
		return s.sandboxes.Run(r.Context(), req, eio)
	})
}

// execFunc runs the command; created is the id of a sandbox made for this
// request (POST /v1/run), empty for an exec in an existing sandbox.
type execFunc func(sandbox.ExecIO) (created string, st agentproto.ExitStatus, err error)

// serveExec answers an exec or run either buffered or as an event stream.
func (s *Server) serveExec(w http.ResponseWriter, r *http.Request, req api.ExecRequest, run execFunc) error {
	format, err := streamFormat(r)
	if err != nil {
		return err
	}
	began := time.Now()
	if format == formatBuffered {
		limit, err := s.sandboxes.OutputLimit(req)
		if err != nil {
			return err
		}
		stdout, stderr := &sandbox.CapBuffer{Limit: limit}, &sandbox.CapBuffer{Limit: limit}
		created, st, err := run(sandbox.ExecIO{Stdout: stdout, Stderr: stderr})
		if err != nil {
			return err
		}
		res := execResult(st, began)
		res.Stdout, res.Stderr = stdout.String(), stderr.String()
		res.StdoutTruncated, res.StderrTruncated = stdout.Truncated, stderr.Truncated
		if created != "" {
			return writeJSON(w, http.StatusOK, api.RunResult{SandboxID: created, ExecResult: res})
		}
		return writeJSON(w, http.StatusOK, res)
	}

	limit, err := s.sandboxes.StreamOutputLimit(req)
	if err != nil {
		return err
	}
	es := &eventStream[api.ExecEvent]{w: w, format: format,
		data: func(typ string, p []byte) api.ExecEvent { return api.ExecEvent{Type: typ, Data: p} },
		name: func(ev api.ExecEvent) string { return ev.Type },
	}
	stdout := &sandbox.CapWriter{W: es.writer(api.EventStdout), Limit: limit}
	stderr := &sandbox.CapWriter{W: es.writer(api.EventStderr), Limit: limit}
	var sandboxID string
	_, st, err := run(sandbox.ExecIO{
		OnSandbox: func(id string) { sandboxID = id },
		Stdout:    stdout,
		Stderr:    stderr,
		OnStart: func(pid int) {
			es.send(api.ExecEvent{Type: api.EventStart, PID: pid, SandboxID: sandboxID})
		},
	})
	if err != nil {
		if !es.started() {
			return err // nothing sent yet: a plain error response
		}
		es.send(api.ExecEvent{Type: api.EventError, Error: errorBody(err)})
		return nil
	}
	res := execResult(st, began)
	res.StdoutTruncated, res.StderrTruncated = stdout.Truncated, stderr.Truncated
	es.send(api.ExecEvent{Type: api.EventExit, Exit: &res})
	return nil
}

func execResult(st agentproto.ExitStatus, began time.Time) api.ExecResult {
	return api.ExecResult{
		ExitCode: st.Code, Signal: st.Signal, TimedOut: st.TimedOut, OOMKilled: st.OOMKilled,
		DurationMS: float64(time.Since(began).Microseconds()) / 1000,
	}
}
