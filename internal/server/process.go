package server

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// processSelector parses a {sel} path value: a pid if it is all digits,
// otherwise a tag (tags are never all digits).
func processSelector(sel string) (pid int, tag string, err error) {
	if sel == "" {
		return 0, "", fmt.Errorf("%w: process selector is empty, want a pid or tag", errdefs.ErrInvalidArgument)
	}
	if strings.Trim(sel, "0123456789") != "" {
		return 0, sel, nil
	}
	n, perr := strconv.Atoi(sel)
	if perr != nil || n <= 0 || n > 1<<22 {
		return 0, "", fmt.Errorf("%w: pid %s is out of range", errdefs.ErrInvalidArgument, sel)
	}
	return n, "", nil
}

// processAPI converts the agent's view of a process to the API's.
func processAPI(p agentproto.ProcInfo) api.Process {
	out := api.Process{
		PID: p.PID, Tag: p.Tag, Cmd: p.Argv, PTY: p.PTY, Stdin: p.Stdin,
		Running: p.Running, StartedAt: p.StartedAt, ExitedAt: p.ExitedAt,
		OutputBytes: p.OutputBytes, DroppedBytes: p.DroppedBytes,
	}
	if out.Cmd == nil {
		out.Cmd = []string{}
	}
	if p.Exit != nil {
		code := p.Exit.Code
		out.ExitCode, out.Signal = &code, p.Exit.Signal
	}
	return out
}

func (s *Server) startProcess(w http.ResponseWriter, r *http.Request) error {
	var req api.StartProcessRequest
	if err := decodeJSON(w, r, maxJSONBody, &req); err != nil {
		return err
	}
	p, err := s.sandboxes.StartProcess(r.Context(), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, processAPI(p))
}

func (s *Server) listProcesses(w http.ResponseWriter, r *http.Request) error {
	c, err := s.agentFor(r)
	if err != nil {
		return err
	}
	ps, err := c.ListProcesses(r.Context())
	if err != nil {
		return err
	}
	list := api.ProcessList{Processes: make([]api.Process, 0, len(ps))}
	for _, p := range ps {
		list.Processes = append(list.Processes, processAPI(p))
	}
	return writeJSON(w, http.StatusOK, list)
}

// processOutput streams a process's buffered output, then (unless
// ?follow=false) its live output until it exits. Disconnecting only
// detaches.
func (s *Server) processOutput(w http.ResponseWriter, r *http.Request) error {
	pid, tag, err := processSelector(r.PathValue("sel"))
	if err != nil {
		return err
	}
	format, err := streamFormat(r)
	if err != nil {
		return err
	}
	if format == formatBuffered {
		format = formatNDJSON // this route always streams
	}
	follow := true
	if r.URL.Query().Has("follow") {
		if follow, err = queryBool(r, "follow"); err != nil {
			return err
		}
	}
	c, err := s.agentFor(r)
	if err != nil {
		return err
	}
	att, err := c.OpenAttach(r.Context(), pid, tag, follow)
	if err != nil {
		return err
	}
	defer att.Close()
	es := &eventStream[api.ProcessEvent]{w: w, format: format,
		data: func(typ string, p []byte) api.ProcessEvent { return api.ProcessEvent{Type: typ, Data: p} },
		name: func(ev api.ProcessEvent) string { return ev.Type },
	}
	start := processAPI(att.Process)
	es.send(api.ProcessEvent{Type: api.EventStart, Process: &start, Dropped: att.Dropped})
	outType := api.EventStdout
	if att.Process.PTY {
		outType = api.EventPTY
	}
	p, err := att.Run(agentproto.AttachHandler{
		Stdout:    es.writer(outType),
		Stderr:    es.writer(api.EventStderr),
		OnDropped: func(n int64) { es.send(api.ProcessEvent{Type: api.EventDropped, Dropped: n}) },
	})
	if err != nil {
		es.send(api.ProcessEvent{Type: api.EventError, Error: errorBody(err)})
		return nil
	}
	end := processAPI(p)
	typ := api.EventExit
	if p.Running {
		typ = api.EventRunning
	}
	es.send(api.ProcessEvent{Type: typ, Process: &end})
	return nil
}

func (s *Server) processStdin(w http.ResponseWriter, r *http.Request) error {
	pid, tag, err := processSelector(r.PathValue("sel"))
	if err != nil {
		return err
	}
	c, err := s.agentFor(r)
	if err != nil {
		return err
	}
	n, err := c.WriteStdin(r.Context(), pid, tag, r.Body)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.StdinResult{Bytes: n})
}

func (s *Server) closeProcessStdin(w http.ResponseWriter, r *http.Request) error {
	pid, tag, err := processSelector(r.PathValue("sel"))
	if err != nil {
		return err
	}
	c, err := s.agentFor(r)
	if err != nil {
		return err
	}
	if err := c.CloseStdin(r.Context(), pid, tag); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) signalProcess(w http.ResponseWriter, r *http.Request) error {
	pid, tag, err := processSelector(r.PathValue("sel"))
	if err != nil {
		return err
	}
	var req api.SignalRequest
	if err := decodeJSON(w, r, maxJSONBody, &req); err != nil {
		return err
	}
	if req.Signal == "" {
		return fmt.Errorf("%w: signal is required, e.g. TERM, INT or 9", errdefs.ErrInvalidArgument)
	}
	c, err := s.agentFor(r)
	if err != nil {
		return err
	}
	if err := c.SignalProcess(r.Context(), pid, tag, req.Signal); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) killProcess(w http.ResponseWriter, r *http.Request) error {
	pid, tag, err := processSelector(r.PathValue("sel"))
	if err != nil {
		return err
	}
	c, err := s.agentFor(r)
	if err != nil {
		return err
	}
	p, err := c.KillProcess(r.Context(), pid, tag)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, processAPI(p))
}
