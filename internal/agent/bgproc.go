package agent

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// bgProc is a background process of the table: started by one request,
// then observed and driven by any number of others.
type bgProc struct {
	pid       int
	tag       string
	argv      []string
	pty       bool
	startedAt time.Time
	out       *outputLog
	run       *runningProc // signals and kills, guarded against pid reuse

	// input is the stdin pipe or the PTY master; nil when the process
	// has no stdin. inputMu serializes writers so that two requests'
	// bytes do not interleave mid-chunk; closing does not take it, so a
	// writer blocked on a process that does not read can be cut off.
	inputMu sync.Mutex
	input   *os.File

	mu        sync.Mutex
	stdinOpen bool
	exit      *agentproto.ExitStatus
	exitedAt  time.Time
	readAt    time.Time
	done      chan struct{} // closed once exited and all output is in out
	resizePTY func(cols, rows int) error
}

// newBgProc registers a started process; tree is its shim, when it was
// spawned under one, so that kills reach everything it started.
func newBgProc(pid int, tree *spawned, tag string, argv []string, input *os.File) *bgProc {
	return &bgProc{
		pid: pid, tag: tag, argv: slices.Clone(argv), startedAt: time.Now().UTC(),
		out: newOutputLog(outputBufferBytes), run: &runningProc{pid: pid, tree: tree},
		input: input, stdinOpen: input != nil, done: make(chan struct{}),
	}
}

func (p *bgProc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit == nil
}

func (p *bgProc) retention() retentionState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return retentionState{running: p.exit == nil, exitedAt: p.exitedAt, readAt: p.readAt}
}

// markRead records that a client received the exit status, which starts
// the grace period after which the entry goes.
func (p *bgProc) markRead() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exit != nil && p.readAt.IsZero() {
		p.readAt = time.Now()
	}
}

func (p *bgProc) info() agentproto.ProcInfo {
	total, dropped := p.out.stats()
	p.mu.Lock()
	defer p.mu.Unlock()
	inf := agentproto.ProcInfo{
		PID: p.pid, Tag: p.tag, Argv: p.argv, PTY: p.pty, Stdin: p.stdinOpen && p.exit == nil,
		StartedAt: p.startedAt, Running: p.exit == nil,
		OutputBytes: total, DroppedBytes: dropped,
	}
	if p.exit != nil {
		exit, at := *p.exit, p.exitedAt
		inf.Exit, inf.ExitedAt = &exit, &at
	}
	return inf
}

// finish records the exit status and ends the output. It is called by
// the process's watcher once the output is drained.
func (p *bgProc) finish(ws unix.WaitStatus) {
	p.run.exit()
	p.mu.Lock()
	st := exitStatus(ws)
	p.exit, p.exitedAt = &st, time.Now().UTC()
	p.mu.Unlock()
	p.closeStdin()
	p.out.close()
	close(p.done)
}

// writeInput writes b to the process's stdin or terminal.
func (p *bgProc) writeInput(b []byte) error {
	p.inputMu.Lock()
	defer p.inputMu.Unlock()
	if err := p.inputOpen(); err != nil {
		return err
	}
	if _, err := p.input.Write(b); err != nil {
		if errors.Is(err, os.ErrClosed) || errors.Is(err, unix.EPIPE) || errors.Is(err, unix.EIO) {
			return fmt.Errorf("process %d: stdin is closed: %w", p.pid, errdefs.ErrConflict)
		}
		return fmt.Errorf("process %d: write stdin: %w", p.pid, err)
	}
	return nil
}

// inputOpen says whether input can be written, as an error if not.
func (p *bgProc) inputOpen() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.input == nil:
		return fmt.Errorf("process %d was started without stdin: %w", p.pid, errdefs.ErrInvalidArgument)
	case p.exit != nil:
		return fmt.Errorf("process %d has exited: %w", p.pid, errdefs.ErrConflict)
	case !p.stdinOpen:
		return fmt.Errorf("process %d: stdin is closed: %w", p.pid, errdefs.ErrConflict)
	}
	return nil
}

// closeStdin closes the stdin pipe so the process reads EOF. A PTY's
// master is left to its watcher, which still reads output from it.
func (p *bgProc) closeStdin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stdinOpen && !p.pty {
		p.input.Close()
	}
	p.stdinOpen = false
}

// requestCloseStdin is closeStdin for a client, refusing PTYs: a terminal
// has no end of input short of hanging up, so the client sends ^D.
func (p *bgProc) requestCloseStdin() error {
	if p.pty {
		return fmt.Errorf("process %d runs on a terminal, which has no stdin to close; send ^D (0x04) instead: %w", p.pid, errdefs.ErrInvalidArgument)
	}
	if err := p.inputOpen(); err != nil {
		return err
	}
	p.closeStdin()
	return nil
}

func (p *bgProc) signal(name string) error {
	sig, ok := parseSignal(name)
	if !ok {
		return fmt.Errorf("unknown signal %q: %w", name, errdefs.ErrInvalidArgument)
	}
	if !p.running() {
		return fmt.Errorf("process %d has exited: %w", p.pid, errdefs.ErrConflict)
	}
	p.run.signal(sig)
	return nil
}

func (p *bgProc) resize(cols, rows int) error {
	if !p.pty || p.resizePTY == nil {
		return fmt.Errorf("process %d has no terminal to resize: %w", p.pid, errdefs.ErrInvalidArgument)
	}
	if err := checkSize(cols, rows); err != nil {
		return err
	}
	if !p.running() {
		return fmt.Errorf("process %d has exited: %w", p.pid, errdefs.ErrConflict)
	}
	return p.resizePTY(cols, rows)
}

// checkSize validates a terminal size: the kernel keeps 16-bit fields.
func checkSize(cols, rows int) error {
	if cols < 1 || rows < 1 || cols > 10000 || rows > 10000 {
		return fmt.Errorf("terminal size %dx%d must be between 1x1 and 10000x10000 (cols x rows): %w", cols, rows, errdefs.ErrInvalidArgument)
	}
	return nil
}

// killWait is how long a kill waits for the process to be reaped, so its
// reply can carry the exit status.
const killWait = 5 * time.Second

// kill kills the process tree and waits briefly for the exit.
func (p *bgProc) kill() agentproto.ProcInfo {
	p.run.kill()
	t := time.NewTimer(killWait)
	defer t.Stop()
	select {
	case <-p.done:
		p.markRead()
	case <-t.C:
	}
	return p.info()
}
