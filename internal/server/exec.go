package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
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
		return id, st, err
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

type execFunc func(sandbox.ExecIO) (sandboxID string, st agentproto.ExitStatus, err error)

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
		id, st, err := run(sandbox.ExecIO{Stdout: stdout, Stderr: stderr})
		if err != nil {
			return err
		}
		res := execResult(st, began)
		res.Stdout, res.Stderr = stdout.String(), stderr.String()
		res.StdoutTruncated, res.StderrTruncated = stdout.Truncated, stderr.Truncated
		if r.URL.Path == "/v1/run" {
			return writeJSON(w, http.StatusOK, api.RunResult{SandboxID: id, ExecResult: res})
		}
		return writeJSON(w, http.StatusOK, res)
	}

	limit, err := s.sandboxes.StreamOutputLimit(req)
	if err != nil {
		return err
	}
	es := &eventStream{w: w, format: format}
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

// eventStream writes exec events as NDJSON lines or SSE events, flushing
// each so clients see output as it is produced.
type eventStream struct {
	w      http.ResponseWriter
	format string

	mu   sync.Mutex
	sent bool
	err  error
}

func (e *eventStream) started() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sent
}

func (e *eventStream) send(ev api.ExecEvent) error {
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
		b = append(b, '\n')
		_, e.err = e.w.Write(b)
	}
	if e.err == nil {
		http.NewResponseController(e.w).Flush()
	}
	return e.err
}

// writer returns an io.Writer that turns each write into an event.
func (e *eventStream) writer(typ string) *eventWriter { return &eventWriter{es: e, typ: typ} }

type eventWriter struct {
	es  *eventStream
	typ string
}

func (w *eventWriter) Write(p []byte) (int, error) {
	if err := w.es.send(api.ExecEvent{Type: w.typ, Data: p}); err != nil {
		return 0, err
	}
	return len(p), nil
}
