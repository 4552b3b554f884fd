package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// interpReadyTimeout bounds an interpreter's start-up: python3 starts in
// tens of milliseconds, node in a few hundred, more under gVisor or load.
const interpReadyTimeout = 30 * time.Second

// driverEvent is a line a driver writes on the control socket.
type driverEvent struct {
	Type   string          `json:"type"` // ready, stdout, stderr, result, error, end
	Data   []byte          `json:"data,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Main   bool            `json:"main,omitempty"`
	Error  *api.CodeError  `json:"error,omitempty"`
	Status *int            `json:"status,omitempty"` // bash: the code's exit status
	// dropped is set instead of the rest for a line over the size limit.
	dropped int
}

// interp is one running interpreter of a context, with its driver.
type interp struct {
	lang   *language
	pid    int
	tree   *spawned
	ctl    *os.File // our end of the control socket
	events chan driverEvent
	stdout *outPump
	stderr *outPump
	exited chan struct{} // closed once the interpreter has exited

	mu     sync.Mutex
	status unix.WaitStatus
	gone   bool // exited: its pid may be reused, signal nothing
}

// startInterp starts lang's interpreter as spec's user, in spec's cwd and
// env, and waits for its driver to be ready.
func (a *Agent) startInterp(lang *language, spec *execSpec, sh string) (*interp, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("code: control socket: %w", err)
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, fmt.Errorf("code: control socket: %w", err)
	}
	ctl, theirs := os.NewFile(uintptr(fds[0]), "code-control"), os.NewFile(uintptr(fds[1]), "code-control")
	outR, outW, err := os.Pipe()
	if err != nil {
		ctl.Close()
		theirs.Close()
		return nil, fmt.Errorf("code: stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		ctl.Close()
		theirs.Close()
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("code: stderr pipe: %w", err)
	}

	spec.argv = lang.argv(spec.argv0, sh)
	spec.argv0 = spec.argv[0]
	sp, err := a.spawn(spec, [3]*os.File{theirs, outW, errW}, spawnOpts{})
	// Only the interpreter may hold these ends: its death must close them.
	theirs.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		ctl.Close()
		outR.Close()
		errR.Close()
		return nil, startError(lang.binary, err)
	}
	ip := &interp{
		lang: lang, pid: sp.pid, tree: sp, ctl: ctl,
		events: make(chan driverEvent, 16),
		stdout: newOutPump(outR), stderr: newOutPump(errR),
		exited: make(chan struct{}),
	}
	go func() {
		st := <-sp.exited
		ip.mu.Lock()
		ip.status, ip.gone = st, true
		ip.mu.Unlock()
		close(ip.exited)
	}()
	go ip.readEvents()
	// What the interpreter says on stderr before its driver is ready
	// explains a failed start.
	var early startOutput
	ip.stderr.setSink(early.write)
	defer ip.stderr.setSink(nil)
	if err := ip.send(lang.preload); err != nil {
		ip.kill()
		ip.release()
		return nil, fmt.Errorf("code: start %s driver: %w", lang.name, err)
	}
	if err := ip.awaitReady(); err != nil {
		ip.kill()
		ip.stderr.flush(runFlushTimeout)
		ip.release()
		if msg := early.String(); msg != "" {
			err = fmt.Errorf("%w; it wrote: %s", err, msg)
		}
		return nil, err
	}
	return ip, nil
}

// startOutput keeps the last KiB an interpreter writes while starting,
// where the reason it stopped is.
type startOutput struct {
	mu  sync.Mutex
	buf []byte
}

func (s *startOutput) write(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, b...)
	if n := len(s.buf) - 1024; n > 0 {
		s.buf = append(s.buf[:0], s.buf[n:]...)
	}
}

func (s *startOutput) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.TrimSpace(string(s.buf))
}

func (ip *interp) awaitReady() error {
	t := time.NewTimer(interpReadyTimeout)
	defer t.Stop()
	exited := func() error {
		return fmt.Errorf("code: %s interpreter exited at start (%s)", ip.lang.name, describeExit(ip.exitStatus()))
	}
	for {
		select {
		case ev, ok := <-ip.events:
			if !ok {
				<-ip.exited
				return exited()
			}
			if ev.Type == "ready" {
				return nil
			}
		case <-ip.exited:
			return exited()
		case <-t.C:
			return fmt.Errorf("code: %s interpreter not ready after %s: %w", ip.lang.name, interpReadyTimeout, errdefs.ErrDeadlineExceeded)
		}
	}
}

// send writes a command to the driver.
func (ip *interp) send(b []byte) error {
	_ = ip.ctl.SetWriteDeadline(time.Now().Add(interpReadyTimeout))
	_, err := ip.ctl.Write(b)
	return err
}

// readEvents decodes the driver's lines until the control socket closes.
func (ip *interp) readEvents() {
	defer close(ip.events)
	r := bufio.NewReaderSize(ip.ctl, 64<<10)
	for {
		line, dropped, err := readLimitedLine(r, agentproto.MaxCodeEvent)
		if err != nil {
			return
		}
		var ev driverEvent
		if dropped > 0 {
			ev.dropped = dropped
		} else if json.Unmarshal(line, &ev) != nil {
			continue // not a driver line: user code wrote to the socket
		}
		ip.events <- ev
	}
}

// readLimitedLine reads a line of at most max bytes; a longer one is
// skipped and its length returned as dropped.
func readLimitedLine(r *bufio.Reader, max int) (line []byte, dropped int, err error) {
	var buf bytes.Buffer
	n := 0
	for {
		chunk, err := r.ReadSlice('\n')
		n += len(chunk)
		if n <= max+1 {
			buf.Write(chunk)
		}
		switch err {
		case nil:
			if n > max+1 {
				return nil, n, nil
			}
			return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), 0, nil
		case bufio.ErrBufferFull:
			continue
		default:
			if err == io.EOF && n > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, 0, err
		}
	}
}

// interrupt sends SIGINT to the interpreter, or to its whole process group
// (its foreground subprocesses too).
func (ip *interp) interrupt(group bool) {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	if ip.gone {
		return
	}
	pid := ip.pid
	if group {
		pid = -pid
	}
	_ = unix.Kill(pid, unix.SIGINT)
}

// kill kills the interpreter and everything it started.
func (ip *interp) kill() {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	if !ip.gone {
		ip.tree.kill()
	}
}

// release closes the agent's ends once the interpreter is gone or given up.
func (ip *interp) release() {
	ip.ctl.Close()
	ip.stdout.close()
	ip.stderr.close()
}

func (ip *interp) exitStatus() unix.WaitStatus {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	return ip.status
}

func (ip *interp) isGone() bool {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	return ip.gone
}

// describeExit says how an interpreter ended, for messages.
func describeExit(ws unix.WaitStatus) string {
	if ws.Signaled() {
		return "killed by " + unix.SignalName(ws.Signal())
	}
	return fmt.Sprintf("exit code %d", ws.ExitStatus())
}

// stop kills the interpreter and its processes and releases it.
func (ip *interp) stop() {
	ip.kill()
	select {
	case <-ip.exited:
	case <-time.After(stopTimeout):
	}
	ip.release()
}
