package agentproto

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// Background process operations (docs/AGENT_PROTOCOL.md, "Processes").
const (
	OpProcStart      = "proc_start"
	OpProcList       = "proc_list"
	OpProcAttach     = "proc_attach"
	OpProcInput      = "proc_input"
	OpProcCloseStdin = "proc_close_stdin"
	OpProcSignal     = "proc_signal"
	OpProcKill       = "proc_kill"
	OpProcResize     = "proc_resize"
)

// ProcRequest is the request of every proc_* operation. Operations on an
// existing process select it by PID, or by Tag when PID is 0.
type ProcRequest struct {
	Op  string `json:"op"`
	PID int    `json:"pid,omitempty"`
	Tag string `json:"tag,omitempty"` // proc_start: the new process's tag

	// proc_start. An empty Argv with PTY set starts the user's login shell.
	Argv  []string `json:"argv,omitempty"`
	Env   []string `json:"env,omitempty"`
	Cwd   string   `json:"cwd,omitempty"`
	User  string   `json:"user,omitempty"`
	Stdin bool     `json:"stdin,omitempty"` // keep a stdin pipe open
	PTY   *PTYSize `json:"pty,omitempty"`

	// proc_attach: stream output until exit (true) or only what is
	// buffered (false).
	Follow bool `json:"follow,omitempty"`

	// proc_signal
	Signal string `json:"signal,omitempty"`

	// proc_resize
	Cols int `json:"cols,omitempty"`
	Rows int `json:"rows,omitempty"`
}

// PTYSize is a terminal size in character cells.
type PTYSize struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// ProcInfo describes a process of the agent's table.
type ProcInfo struct {
	PID       int         `json:"pid"`
	Tag       string      `json:"tag,omitempty"`
	Argv      []string    `json:"argv"`
	PTY       bool        `json:"pty,omitempty"`
	Stdin     bool        `json:"stdin,omitempty"` // stdin is open for input
	StartedAt time.Time   `json:"started_at"`
	Running   bool        `json:"running"`
	Exit      *ExitStatus `json:"exit,omitempty"`
	ExitedAt  *time.Time  `json:"exited_at,omitempty"`
	// OutputBytes counts everything the process wrote; DroppedBytes how
	// much of it is no longer buffered.
	OutputBytes  int64 `json:"output_bytes"`
	DroppedBytes int64 `json:"dropped_bytes"`
}

// ProcReply is the reply of the proc_* operations. On an attach stream it
// is sent first (Process, and Dropped bytes already lost), mid-stream
// (Dropped, when the reader fell behind the buffer) and last (Done, with
// the final Process).
type ProcReply struct {
	Error     *WireError `json:"error,omitempty"`
	Process   *ProcInfo  `json:"process,omitempty"`
	Processes []ProcInfo `json:"processes,omitempty"`
	Dropped   int64      `json:"dropped,omitempty"`
	Done      bool       `json:"done,omitempty"`
	Size      int64      `json:"size,omitempty"` // proc_input: bytes written
}

// ProcControl is a control frame on an attach stream.
type ProcControl struct {
	Signal string `json:"signal,omitempty"`
	Cols   int    `json:"cols,omitempty"`
	Rows   int    `json:"rows,omitempty"`
}

func (c *Client) procCall(ctx context.Context, req ProcRequest) (ProcReply, error) {
	s, stop, err := c.stream(ctx, req)
	if err != nil {
		return ProcReply{}, err
	}
	defer stop()
	return readProcReply(ctx, s)
}

func readProcReply(ctx context.Context, r io.Reader) (ProcReply, error) {
	f, err := ReadFrame(r)
	if err != nil {
		return ProcReply{}, streamErr(ctx, err)
	}
	if f.Type != FrameReply {
		return ProcReply{}, unexpected(f)
	}
	var rep ProcReply
	if err := f.Decode(&rep); err != nil {
		return ProcReply{}, err
	}
	if rep.Error != nil {
		return rep, rep.Error
	}
	return rep, nil
}

// procInfo returns the reply's process or an error naming the operation.
func procInfo(op string, rep ProcReply, err error) (ProcInfo, error) {
	if err != nil {
		return ProcInfo{}, err
	}
	if rep.Process == nil {
		return ProcInfo{}, fmt.Errorf("agentproto: %s reply without process", op)
	}
	return *rep.Process, nil
}

// StartProcess starts a background process (Op is set) and returns it.
func (c *Client) StartProcess(ctx context.Context, req ProcRequest) (ProcInfo, error) {
	req.Op = OpProcStart
	rep, err := c.procCall(ctx, req)
	return procInfo(req.Op, rep, err)
}

// ListProcesses lists the agent's process table.
func (c *Client) ListProcesses(ctx context.Context) ([]ProcInfo, error) {
	rep, err := c.procCall(ctx, ProcRequest{Op: OpProcList})
	return rep.Processes, err
}

// SignalProcess sends sig (a name like "TERM" or a number) to the
// process's group.
func (c *Client) SignalProcess(ctx context.Context, pid int, tag, sig string) error {
	_, err := c.procCall(ctx, ProcRequest{Op: OpProcSignal, PID: pid, Tag: tag, Signal: sig})
	return err
}

// KillProcess kills the process's whole tree and returns it, with its
// exit status once it is gone (the agent waits a few seconds for that).
func (c *Client) KillProcess(ctx context.Context, pid int, tag string) (ProcInfo, error) {
	rep, err := c.procCall(ctx, ProcRequest{Op: OpProcKill, PID: pid, Tag: tag})
	return procInfo(OpProcKill, rep, err)
}

// CloseStdin closes the process's stdin pipe, so it reads EOF.
func (c *Client) CloseStdin(ctx context.Context, pid int, tag string) error {
	_, err := c.procCall(ctx, ProcRequest{Op: OpProcCloseStdin, PID: pid, Tag: tag})
	return err
}

// ResizePTY sets the terminal size of a PTY process.
func (c *Client) ResizePTY(ctx context.Context, pid int, tag string, cols, rows int) error {
	_, err := c.procCall(ctx, ProcRequest{Op: OpProcResize, PID: pid, Tag: tag, Cols: cols, Rows: rows})
	return err
}

// WriteStdin sends everything r yields to the process's stdin (or its
// terminal) and returns the number of bytes written.
func (c *Client) WriteStdin(ctx context.Context, pid int, tag string, r io.Reader) (int64, error) {
	s, stop, err := c.stream(ctx, ProcRequest{Op: OpProcInput, PID: pid, Tag: tag})
	if err != nil {
		return 0, err
	}
	defer stop()
	// The agent answers first whether the process takes input.
	if _, err := readProcReply(ctx, s); err != nil {
		return 0, err
	}
	final := make(chan procResult, 1)
	go func() {
		rep, err := readProcReply(ctx, s)
		final <- procResult{rep, err}
	}()
	buf := make([]byte, ChunkSize)
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			if err := WriteFrame(s, FrameData, buf[:n]); err != nil {
				res := <-final
				if res.err != nil {
					return res.rep.Size, res.err
				}
				return res.rep.Size, streamErr(ctx, err)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return 0, fmt.Errorf("read stdin body: %w", rerr)
		}
	}
	if err := WriteFrame(s, FrameEOF, nil); err != nil {
		return 0, streamErr(ctx, err)
	}
	res := <-final
	return res.rep.Size, res.err
}

type procResult struct {
	rep ProcReply
	err error
}

// AttachHandler receives an attach stream's events. Any field may be nil.
type AttachHandler struct {
	// OnStart is called with the process as found, and the bytes of its
	// output that were dropped from the buffer before the first chunk.
	OnStart func(p ProcInfo, dropped int64)
	Stdout  io.Writer // stdout, or the terminal's output of a PTY process
	Stderr  io.Writer
	// OnDropped is called when the reader fell behind and n bytes were
	// dropped from the buffer before it could read them.
	OnDropped func(n int64)
}

// Attach streams a process's buffered output and, with follow, its live
// output until it exits. It returns the process as last seen: with its
// exit status when it exited. Cancelling ctx detaches without affecting
// the process.
func (c *Client) Attach(ctx context.Context, pid int, tag string, follow bool, h AttachHandler) (ProcInfo, error) {
	att, err := c.OpenAttach(ctx, pid, tag, follow)
	if err != nil {
		return ProcInfo{}, err
	}
	defer att.Close()
	if h.OnStart != nil {
		h.OnStart(att.Process, att.Dropped)
	}
	return att.Run(h)
}

// Attachment is an open attach stream: Run reads its output, while Write,
// Resize and Signal act on the process through it.
type Attachment struct {
	// Process is the process as found when attaching; Dropped counts the
	// bytes of its output no longer buffered then.
	Process ProcInfo
	Dropped int64

	ctx  context.Context
	s    io.ReadWriter
	stop func()
	w    *syncWriter
}

// OpenAttach opens an attach stream and reads its first reply, so a
// missing process is an error here. The caller must call Close.
func (c *Client) OpenAttach(ctx context.Context, pid int, tag string, follow bool) (*Attachment, error) {
	s, stop, err := c.stream(ctx, ProcRequest{Op: OpProcAttach, PID: pid, Tag: tag, Follow: follow})
	if err != nil {
		return nil, err
	}
	rep, err := readProcReply(ctx, s)
	info, err := procInfo(OpProcAttach, rep, err)
	if err != nil {
		stop()
		return nil, err
	}
	return &Attachment{Process: info, Dropped: rep.Dropped, ctx: ctx, s: s, stop: stop, w: &syncWriter{w: s}}, nil
}

// Close detaches. It does not affect the process.
func (a *Attachment) Close() { a.stop() }

// Write sends p to the process's stdin or terminal.
func (a *Attachment) Write(p []byte) (int, error) {
	for off := 0; off < len(p); off += ChunkSize {
		end := min(off+ChunkSize, len(p))
		if err := a.w.frame(FrameData, p[off:end]); err != nil {
			return off, streamErr(a.ctx, err)
		}
	}
	return len(p), nil
}

// CloseStdin closes the process's stdin pipe.
func (a *Attachment) CloseStdin() error { return a.w.frame(FrameEOF, nil) }

// Resize sets the terminal size of a PTY process.
func (a *Attachment) Resize(cols, rows int) error {
	return a.w.json(FrameControl, ProcControl{Cols: cols, Rows: rows})
}

// Signal sends sig to the process's group.
func (a *Attachment) Signal(sig string) error {
	return a.w.json(FrameControl, ProcControl{Signal: sig})
}

// Run reads the stream until the process exits (or, without follow, the
// buffer is sent) and returns the process as last seen. h.OnStart is not
// called: the attachment's Process and Dropped carry that.
func (a *Attachment) Run(h AttachHandler) (ProcInfo, error) {
	for {
		f, err := ReadFrame(a.s)
		if err != nil {
			return ProcInfo{}, streamErr(a.ctx, err)
		}
		switch f.Type {
		case FrameStdout, FrameStderr:
			w := h.Stdout
			if f.Type == FrameStderr {
				w = h.Stderr
			}
			if w != nil {
				if _, err := w.Write(f.Payload); err != nil {
					return ProcInfo{}, fmt.Errorf("write output: %w", err)
				}
			}
		case FrameReply:
			var rep ProcReply
			if err := f.Decode(&rep); err != nil {
				return ProcInfo{}, err
			}
			switch {
			case rep.Error != nil:
				return ProcInfo{}, rep.Error
			case rep.Done:
				return procInfo(OpProcAttach, rep, nil)
			case rep.Dropped > 0 && h.OnDropped != nil:
				h.OnDropped(rep.Dropped)
			}
		default:
			return ProcInfo{}, unexpected(f)
		}
	}
}

// syncWriter serializes frames written from several goroutines (input
// and resizes of one terminal).
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) frame(typ byte, p []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return WriteFrame(s.w, typ, p)
}

func (s *syncWriter) json(typ byte, v any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return WriteJSON(s.w, typ, v)
}
