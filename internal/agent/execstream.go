package agent

import (
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockdev/airlock/internal/agentproto"
)

// outputGrace is how long output still buffered in the pipes is forwarded
// after the process exits. Background children inheriting stdout keep the
// pipes open indefinitely; they must not hold the exec open.
const outputGrace = 100 * time.Millisecond

// maxTimeoutMS is the largest timeout_ms that fits a time.Duration; larger
// values mean no timeout.
const maxTimeoutMS = int64(1<<63-1) / int64(time.Millisecond)

// exec runs an exec request on stream s and streams its output until it
// exits, the timeout passes or the daemon goes away.
func (a *Agent) exec(ctx context.Context, s io.ReadWriteCloser, w *frameWriter, req agentproto.Request) {
	p, err := a.startProcess(req)
	if err != nil {
		w.fail(err)
		return
	}
	// If the pid cannot even be announced the daemon is gone: kill at once,
	// but still go through the wait below so the exec winds down normally.
	running := &runningProc{pid: p.pid, tree: p.tree}
	if err := w.reply(agentproto.Reply{PID: p.pid}); err != nil {
		running.kill()
	}

	var pumps sync.WaitGroup
	pumps.Add(2)
	go pump(&pumps, p.stdout, w, agentproto.FrameStdout)
	go pump(&pumps, p.stderr, w, agentproto.FrameStderr)

	aborted := make(chan struct{})
	go readInput(s, p.stdin, running, aborted)

	var timeout <-chan time.Time
	if req.TimeoutMS > 0 && req.TimeoutMS < maxTimeoutMS {
		t := time.NewTimer(time.Duration(req.TimeoutMS) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	// Each way of ending the exec kills the tree once (its channel is then
	// disabled), and the loop still waits for the exit status: the process
	// is only gone once the reaper has collected it.
	var status unix.WaitStatus
	timedOut := false
	sessionDone := ctx.Done()
wait:
	for {
		select {
		case status = <-p.exited:
			break wait
		case <-timeout:
			timeout, timedOut = nil, true
			running.kill()
		case <-aborted:
			aborted = nil
			running.kill()
		case <-sessionDone:
			sessionDone = nil
			running.kill()
		}
	}
	running.exit()
	if p.stdin != nil {
		p.stdin.Close() // unblocks readInput if it is stuck feeding stdin
	}

	drainOutput(&pumps, p.stdout, p.stderr)
	exit := exitStatus(status)
	exit.TimedOut = timedOut
	w.reply(agentproto.Reply{Exit: &exit})
}

// runningProc guards signalling an exec's pid against its exit: once the
// reaper has collected it the pid may be reused by an unrelated process.
type runningProc struct {
	mu     sync.Mutex
	pid    int
	tree   *spawned // set when started by spawn (under an exec shim)
	exited bool
}

// kill kills everything the process started: all the shim's processes
// when it was spawned under one, else pid's group and descendants.
func (r *runningProc) kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.exited {
		if r.tree != nil {
			r.tree.kill()
			return
		}
		killTree(r.pid)
	}
}

// signal delivers sig to the process group, the way a terminal would.
func (r *runningProc) signal(sig unix.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.exited {
		_ = unix.Kill(-r.pid, sig)
	}
}

func (r *runningProc) exit() {
	r.mu.Lock()
	r.exited = true
	r.mu.Unlock()
}

// pump forwards one output pipe as frames of typ until it ends. When the
// stream fails (daemon gone) it keeps draining so the writer never blocks
// on a full pipe.
func pump(wg *sync.WaitGroup, r *os.File, w *frameWriter, typ byte) {
	defer wg.Done()
	buf := make([]byte, agentproto.ChunkSize)
	streamOK := true
	for {
		n, err := r.Read(buf)
		if n > 0 && streamOK {
			streamOK = w.frame(typ, buf[:n]) == nil
		}
		if err != nil {
			return
		}
	}
}

// drainOutput lets the pumps forward what the process left in its pipes,
// for at most outputGrace, then cuts them off and closes the pipes.
func drainOutput(pumps *sync.WaitGroup, pipes ...*os.File) {
	done := make(chan struct{})
	go func() {
		pumps.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(outputGrace):
		// A deadline, not Close: a pump may be mid-write to the stream
		// (backpressure from the daemon), and the bytes it already read
		// must still go out before the exit reply.
		for _, f := range pipes {
			_ = f.SetReadDeadline(time.Now())
		}
		<-done
	}
	for _, f := range pipes {
		f.Close()
	}
}

// readInput handles the daemon's frames on an exec stream: stdin data,
// stdin EOF and signals. When the stream fails the daemon has closed it
// (or the connection died), which aborts the exec.
//
// Stdin is written synchronously, so a process that does not read its
// stdin backpressures the daemon through the stream's flow control. The
// cost is that control frames queued behind unread stdin wait for it; the
// timeout and the process exit (which closes stdin) still end the exec.
func readInput(s io.ReadCloser, stdin *os.File, p *runningProc, aborted chan<- struct{}) {
	defer close(aborted)
	stdinOpen := stdin != nil
	for {
		f, err := agentproto.ReadFrame(s)
		if err != nil {
			// Closing our end too fails pending output writes, so the
			// exec winds down without anyone reading it.
			s.Close()
			return
		}
		switch f.Type {
		case agentproto.FrameData:
			if stdinOpen {
				if _, err := stdin.Write(f.Payload); err != nil {
					// The process closed stdin or exited: drop the rest,
					// as a shell pipeline would.
					stdin.Close()
					stdinOpen = false
				}
			}
		case agentproto.FrameEOF:
			if stdinOpen {
				stdin.Close()
				stdinOpen = false
			}
		case agentproto.FrameControl:
			var c agentproto.Control
			if f.Decode(&c) == nil && c.Signal != "" {
				if sig, ok := parseSignal(c.Signal); ok {
					p.signal(sig)
				}
			}
		}
	}
}

// exitStatus turns a wait status into the wire form: the exit code, or
// 128+signal and the signal's name without "SIG" for a killed process.
func exitStatus(ws unix.WaitStatus) agentproto.ExitStatus {
	if ws.Signaled() {
		sig := ws.Signal()
		return agentproto.ExitStatus{
			Code:   128 + int(sig),
			Signal: strings.TrimPrefix(unix.SignalName(sig), "SIG"),
		}
	}
	return agentproto.ExitStatus{Code: ws.ExitStatus()}
}

var signalsByName = map[string]unix.Signal{
	"INT": unix.SIGINT, "TERM": unix.SIGTERM, "KILL": unix.SIGKILL,
	"HUP": unix.SIGHUP, "QUIT": unix.SIGQUIT, "USR1": unix.SIGUSR1,
	"USR2": unix.SIGUSR2, "STOP": unix.SIGSTOP, "CONT": unix.SIGCONT,
	"WINCH": unix.SIGWINCH, "ALRM": unix.SIGALRM, "TSTP": unix.SIGTSTP,
}

// parseSignal accepts a name with or without "SIG", or a number.
func parseSignal(s string) (unix.Signal, bool) {
	s = strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "SIG")
	if sig, ok := signalsByName[s]; ok {
		return sig, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > 64 {
		return 0, false
	}
	return unix.Signal(n), true
}
