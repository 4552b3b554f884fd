package agent

import (
	"errors"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockdev/airlock/internal/agentproto"
)

// outPump forwards one of an interpreter's output pipes (fd 1 or 2, where
// subprocesses and C libraries write) to the run in progress. Between
// runs the output has nowhere to go and is dropped.
//
// A run ends when the driver says so on the control socket, a different
// channel from these pipes; flush makes sure what the code wrote to the
// pipes before that went out first.
type outPump struct {
	f *os.File // non-blocking (os.Pipe), so read deadlines work

	mu      sync.Mutex
	sink    func([]byte) // held under mu while called: cleared only between writes
	waiters []chan struct{}
	eof     bool
}

func newOutPump(f *os.File) *outPump {
	p := &outPump{f: f}
	go p.loop()
	return p
}

func (p *outPump) setSink(fn func([]byte)) {
	p.mu.Lock()
	p.sink = fn
	p.mu.Unlock()
}

func (p *outPump) emit(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sink != nil {
		p.sink(b)
	}
}

func (p *outPump) loop() {
	buf := make([]byte, agentproto.ChunkSize)
	for {
		n, err := p.f.Read(buf)
		if n > 0 {
			p.emit(buf[:n])
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// A flush: forward whatever is in the pipe now, then release
			// the waiters. The deadline must be cleared first: the raw
			// read refuses to run past it.
			_ = p.f.SetReadDeadline(time.Time{})
			p.drain(buf)
			p.release(false)
			continue
		}
		if err != nil {
			p.release(true)
			return
		}
	}
}

// drain reads what the pipe holds without waiting for more.
func (p *outPump) drain(buf []byte) {
	rc, err := p.f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Read(func(fd uintptr) bool {
		for {
			n, err := unix.Read(int(fd), buf)
			if n > 0 {
				p.emit(buf[:n])
			}
			if n <= 0 || err != nil {
				return true // EAGAIN: empty; never wait
			}
		}
	})
}

func (p *outPump) release(eof bool) {
	p.mu.Lock()
	ws := p.waiters
	p.waiters = nil
	if eof {
		p.eof = true
	}
	p.mu.Unlock()
	for _, w := range ws {
		close(w)
	}
}

// flush waits, at most max, until everything written to the pipe before
// the call has been passed to the sink.
func (p *outPump) flush(max time.Duration) {
	ch := make(chan struct{})
	p.mu.Lock()
	if p.eof {
		p.mu.Unlock()
		return
	}
	p.waiters = append(p.waiters, ch)
	p.mu.Unlock()
	_ = p.f.SetReadDeadline(time.Now())
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	}
}

func (p *outPump) close() { p.f.Close() }
