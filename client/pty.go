package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/coder/websocket"

	"github.com/airlockdev/airlock/api"
)

// PTYOptions says which terminal session Sandbox.PTY opens.
type PTYOptions struct {
	// Cmd is the argv to run; empty runs the user's login shell.
	Cmd  []string
	Env  map[string]string
	Cwd  string
	User string
	Tag  string
	// Cols and Rows are the initial size (default 80x24).
	Cols, Rows int
	// Attach, a pid or tag, reattaches to an existing process instead of
	// starting one; then only Cols and Rows may be set besides it.
	Attach string
}

func (o PTYOptions) query() url.Values {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	if o.Cols > 0 {
		q.Set("cols", strconv.Itoa(o.Cols))
	}
	if o.Rows > 0 {
		q.Set("rows", strconv.Itoa(o.Rows))
	}
	set("attach", o.Attach)
	set("cwd", o.Cwd)
	set("user", o.User)
	set("tag", o.Tag)
	for _, a := range o.Cmd {
		q.Add("cmd", a)
	}
	for k, v := range o.Env {
		q.Add("env", k+"="+v)
	}
	return q
}

// ErrDetached is returned by PTY.Wait when the connection ended before
// the process did: it runs on and can be reattached.
var ErrDetached = errors.New("airlock: terminal connection closed before the process exited")

// PTY is an interactive terminal session in a sandbox, over a WebSocket.
// Read returns the terminal's output and must be drained for Wait to
// return, as with a pipe; Write types into it.
type PTY struct {
	conn *websocket.Conn
	pid  int
	tag  string
	out  *io.PipeReader

	done     chan struct{} // closed when the connection's reader ends
	exitCode int
	exitSig  string
	exited   bool
	err      error
	closeMu  sync.Once
}

// PTY opens a terminal session: it starts opts.Cmd (or the login shell)
// on a pseudo-terminal, or reattaches to opts.Attach. Closing the PTY
// detaches; the process keeps running until it exits or is killed.
func (s *Sandbox) PTY(ctx context.Context, opts PTYOptions) (*PTY, error) {
	p, err := sandboxPath(s.ID, "/pty")
	if err != nil {
		return nil, err
	}
	u := s.c.base + p + "?" + opts.query().Encode()
	u = "ws" + strings.TrimPrefix(u, "http") // http→ws, https→wss
	hdr := http.Header{}
	if s.c.userAgent != "" {
		hdr.Set("User-Agent", s.c.userAgent)
	}
	if s.c.apiKey != "" {
		hdr.Set("Authorization", "Bearer "+s.c.apiKey)
	}
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: s.c.http, HTTPHeader: hdr})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			return nil, decodeError(resp)
		}
		return nil, fmt.Errorf("airlock: open terminal: %w", err)
	}
	conn.SetReadLimit(1 << 20)
	// The first message names the process.
	typ, b, err := conn.Read(ctx)
	var m api.PTYMessage
	if err == nil && (typ != websocket.MessageText || json.Unmarshal(b, &m) != nil || m.Type != api.PTYMessageStart) {
		err = errors.New("first message is not a start message")
	}
	if err != nil {
		conn.CloseNow()
		return nil, fmt.Errorf("airlock: open terminal: %w", err)
	}
	pr, pw := io.Pipe()
	t := &PTY{conn: conn, pid: m.PID, tag: m.Tag, out: pr, done: make(chan struct{})}
	go t.readLoop(pw)
	return t, nil
}

// readLoop feeds terminal output to the pipe and records the exit.
func (t *PTY) readLoop(pw *io.PipeWriter) {
	defer close(t.done)
	for {
		typ, b, err := t.conn.Read(context.Background())
		if err != nil {
			if !t.exited {
				t.err = ErrDetached
				var ce websocket.CloseError
				if errors.As(err, &ce) && ce.Code != websocket.StatusNormalClosure && ce.Reason != "" {
					t.err = fmt.Errorf("%w: %s", ErrDetached, ce.Reason)
				}
			}
			pw.Close() // the reader sees EOF once output is drained
			return
		}
		if typ == websocket.MessageBinary {
			if _, err := pw.Write(b); err != nil {
				t.conn.CloseNow() // the PTY was closed
			}
			continue
		}
		var m api.PTYMessage
		if json.Unmarshal(b, &m) == nil && m.Type == api.PTYMessageExit && m.ExitCode != nil {
			t.exitCode, t.exitSig, t.exited = *m.ExitCode, m.Signal, true
		}
	}
}

// PID is the process's pid in the sandbox.
func (t *PTY) PID() int { return t.pid }

// Tag is the process's tag, if it has one.
func (t *PTY) Tag() string { return t.tag }

// Read reads terminal output. It returns io.EOF after the process exited
// (or the connection closed) and all output was read.
func (t *PTY) Read(p []byte) (int, error) { return t.out.Read(p) }

// Write sends keystrokes (any bytes) to the terminal.
func (t *PTY) Write(p []byte) (int, error) {
	if err := t.conn.Write(context.Background(), websocket.MessageBinary, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Resize changes the terminal size; the process gets SIGWINCH.
func (t *PTY) Resize(ctx context.Context, cols, rows int) error {
	return t.control(ctx, api.PTYMessage{Type: api.PTYMessageResize, Cols: cols, Rows: rows})
}

// Signal sends a signal (name or number) to the terminal's process group.
func (t *PTY) Signal(ctx context.Context, sig string) error {
	return t.control(ctx, api.PTYMessage{Type: api.PTYMessageSignal, Signal: sig})
}

func (t *PTY) control(ctx context.Context, m api.PTYMessage) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return t.conn.Write(ctx, websocket.MessageText, b)
}

// Wait waits for the process to exit and returns its exit code (128+n
// when killed by signal n; see ExitSignal). It returns ErrDetached if the
// connection ended first.
func (t *PTY) Wait(ctx context.Context) (int, error) {
	select {
	case <-t.done:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if !t.exited {
		return 0, t.err
	}
	return t.exitCode, nil
}

// ExitSignal is the name of the signal that killed the process ("KILL"),
// after Wait returned, or "".
func (t *PTY) ExitSignal() string {
	<-t.done
	return t.exitSig
}

// Close detaches from the terminal. The process keeps running; use
// Sandbox.Kill to end it.
func (t *PTY) Close() error {
	t.closeMu.Do(func() {
		t.out.Close()
		t.conn.Close(websocket.StatusNormalClosure, "")
	})
	return nil
}
