package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// ptyQueryParams are the query parameters GET /v1/sandboxes/{id}/pty takes.
var ptyQueryParams = map[string]bool{
	"cmd": true, "cols": true, "rows": true, "tag": true, "user": true,
	"cwd": true, "env": true, "attach": true,
}

// ptyRequest parses the PTY WebSocket's query: a process to start, or
// attach=pid|tag to reattach to one.
func ptyRequest(r *http.Request) (start *api.StartProcessRequest, attach string, size api.PTYSize, err error) {
	q := r.URL.Query()
	for k := range q {
		if !ptyQueryParams[k] {
			return nil, "", size, fmt.Errorf("%w: unknown query parameter %q", errdefs.ErrInvalidArgument, k)
		}
	}
	for _, f := range []struct {
		name string
		v    *int
	}{{"cols", &size.Cols}, {"rows", &size.Rows}} {
		if s := q.Get(f.name); s != "" {
			n, perr := strconv.Atoi(s)
			if perr != nil || n < 1 || n > 10000 {
				return nil, "", size, fmt.Errorf("%w: %s must be an integer from 1 to 10000, got %q", errdefs.ErrInvalidArgument, f.name, s)
			}
			*f.v = n
		}
	}
	if attach = q.Get("attach"); attach != "" {
		for _, k := range []string{"cmd", "tag", "user", "cwd", "env"} {
			if q.Has(k) {
				return nil, "", size, fmt.Errorf("%w: %s does not apply with attach", errdefs.ErrInvalidArgument, k)
			}
		}
		return nil, attach, size, nil
	}
	start = &api.StartProcessRequest{
		Cmd: q["cmd"], Tag: q.Get("tag"), User: q.Get("user"), Cwd: q.Get("cwd"),
		PTY: &api.PTYSize{Cols: size.Cols, Rows: size.Rows},
	}
	for _, kv := range q["env"] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, "", size, fmt.Errorf("%w: env must be KEY=VALUE, got %q", errdefs.ErrInvalidArgument, kv)
		}
		if start.Env == nil {
			start.Env = map[string]string{}
		}
		start.Env[k] = v
	}
	return start, "", size, nil
}

// isWebSocket reports whether r asks for a WebSocket upgrade.
func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket") &&
		strings.Contains(strings.ToLower(r.Header.Get("Connection")), "upgrade")
}

// pty serves an interactive terminal over a WebSocket: binary messages
// are terminal bytes both ways, text messages JSON control (api.PTYMessage).
// Everything that can fail is checked before the upgrade, so errors are
// ordinary HTTP responses. Closing the socket detaches: the process runs
// on and can be reattached with ?attach= until it exits or is killed.
func (s *Server) pty(w http.ResponseWriter, r *http.Request) error {
	if !isWebSocket(r) {
		return fmt.Errorf("%w: this route is a WebSocket; connect with Upgrade: websocket", errdefs.ErrInvalidArgument)
	}
	start, attach, size, err := ptyRequest(r)
	if err != nil {
		return err
	}
	c, err := s.agentFor(r)
	if err != nil {
		return err
	}
	var pid int
	tag := ""
	if start != nil {
		p, err := s.sandboxes.StartProcess(r.Context(), r.PathValue("id"), *start)
		if err != nil {
			return err
		}
		pid = p.PID
	} else if pid, tag, err = processSelector(attach); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	att, err := c.OpenAttach(ctx, pid, tag, true)
	if err != nil {
		return err
	}
	defer att.Close()
	if start == nil && size.Cols > 0 && size.Rows > 0 {
		att.Resize(size.Cols, size.Rows)
	}
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		// Accept has answered; a process nobody can reach must not linger.
		if start != nil {
			kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			c.KillProcess(kctx, pid, "")
			kcancel()
		}
		return nil
	}
	defer conn.CloseNow()
	conn.SetReadLimit(1 << 20)
	s.servePTY(ctx, cancel, conn, att)
	return nil
}

func (s *Server) servePTY(ctx context.Context, cancel context.CancelFunc, conn *websocket.Conn, att *agentproto.Attachment) {
	sendJSON := func(m api.PTYMessage) error {
		b, _ := json.Marshal(m)
		return conn.Write(ctx, websocket.MessageText, b)
	}
	if sendJSON(api.PTYMessage{Type: api.PTYMessageStart, PID: att.Process.PID, Tag: att.Process.Tag}) != nil {
		return
	}
	go func() {
		defer cancel() // the client is gone: detach
		for {
			typ, data, err := conn.Read(ctx)
			if err != nil {
				return
			}
			if typ == websocket.MessageBinary {
				if _, err := att.Write(data); err != nil {
					return
				}
				continue
			}
			var m api.PTYMessage
			if err := json.Unmarshal(data, &m); err != nil {
				conn.Close(websocket.StatusUnsupportedData, "text messages must be JSON control messages")
				return
			}
			switch m.Type {
			case api.PTYMessageResize:
				err = att.Resize(m.Cols, m.Rows)
			case api.PTYMessageSignal:
				err = att.Signal(m.Signal)
			}
			if err != nil {
				return
			}
		}
	}()
	p, err := att.Run(agentproto.AttachHandler{Stdout: wsWriter{ctx, conn}, Stderr: wsWriter{ctx, conn}})
	switch {
	case err != nil && ctx.Err() != nil:
		// Detached by the client.
	case err != nil:
		reason := err.Error()
		if len(reason) > 120 { // a close reason must fit a control frame
			reason = reason[:120]
		}
		conn.Close(websocket.StatusInternalError, reason)
	case p.Exit != nil:
		code := p.Exit.Code
		if sendJSON(api.PTYMessage{Type: api.PTYMessageExit, ExitCode: &code, Signal: p.Exit.Signal}) == nil {
			conn.Close(websocket.StatusNormalClosure, "")
		}
	}
}

// wsWriter sends each write as one binary message.
type wsWriter struct {
	ctx  context.Context
	conn *websocket.Conn
}

func (w wsWriter) Write(p []byte) (int, error) {
	if err := w.conn.Write(w.ctx, websocket.MessageBinary, p); err != nil {
		return 0, err
	}
	return len(p), nil
}
