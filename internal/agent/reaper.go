package agent

import (
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// reaper is the only code in the process that waits for children. As PID 1
// the agent inherits every orphan in the sandbox and must reap them or they
// stay zombies forever; and since a wait4(-1) reaper would steal the status
// of any child someone else waits for by pid (exec.Cmd.Wait), all children
// are started through it and receive their status from it.
//
// There is one reaper per process, started on first use: two of them
// would race for each other's children.
type reaper struct {
	// mu is held across fork+register and across wait4+dispatch, so a
	// child that exits immediately cannot be reaped before its waiter is
	// registered. That also means every status for an unregistered pid is
	// an orphan's and can be dropped; keeping it for a later registration
	// would hand a stale status to a new child that reused the pid.
	mu      sync.Mutex
	waiters map[int]chan unix.WaitStatus
}

var (
	reaperOnce sync.Once
	theReaper  *reaper
)

// getReaper returns the process-wide reaper, starting it if needed.
func getReaper() *reaper {
	reaperOnce.Do(func() {
		theReaper = &reaper{waiters: make(map[int]chan unix.WaitStatus)}
		// Buffer one: signals coalesce anyway, and each wakeup drains every
		// exited child, so a SIGCHLD arriving mid-drain just causes one
		// more pass.
		sigc := make(chan os.Signal, 1)
		signal.Notify(sigc, syscall.SIGCHLD)
		go theReaper.loop(sigc)
	})
	return theReaper
}

func (r *reaper) loop(sigc <-chan os.Signal) {
	r.reap() // children that exited before we were listening
	for range sigc {
		r.reap()
	}
}

// reap collects every exited child without blocking.
func (r *reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return // ECHILD: no children; 0: none exited yet
		}
		if c, ok := r.waiters[pid]; ok {
			delete(r.waiters, pid)
			c <- ws // buffered, never blocks
		}
	}
}

// start runs fork, which must start exactly one child and return its pid,
// and returns a channel that receives the child's wait status once.
func (r *reaper) start(fork func() (int, error)) (int, <-chan unix.WaitStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := fork()
	if err != nil {
		return 0, nil, err
	}
	c := make(chan unix.WaitStatus, 1)
	r.waiters[pid] = c
	return pid, c, nil
}
