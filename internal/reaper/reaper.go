// Package reaper makes the daemon a child subreaper that promptly reaps the
// processes runtimes leave behind. `runsc run --detach` and `runc run -d`
// exit after starting a sandbox, so its monitor processes are reparented.
// Without a subreaper they go to the host's init, and a runtime's delete
// waits until init gets round to reaping them: over a second per sandbox
// on hosts whose init reaps lazily, forever when airlock itself is PID 1
// of a container.
//
// Once Enable is called, every child this process starts must be started
// through Start (or Run, CombinedOutput), so the reaper knows to leave it
// for its own Wait.
package reaper

import (
	"bytes"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

var (
	// startMu is held for reading while a command starts and registers,
	// and for writing while the reaper picks zombies, so the reaper never
	// sees one of our own children before it is registered.
	startMu sync.RWMutex
	mu      sync.Mutex
	ours    = map[int]bool{}
	once    sync.Once
)

// Enable makes this process a child subreaper and starts reaping orphans.
func Enable() error {
	var err error
	once.Do(func() {
		if err = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return
		}
		go loop()
	})
	return err
}

func loop() {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD)
	tick := time.NewTicker(time.Second)
	for {
		select {
		case <-sigs:
		case <-tick.C:
		}
		reapOrphans()
	}
}

// reapOrphans reaps zombie children that were not started through Start.
func reapOrphans() {
	startMu.Lock()
	defer startMu.Unlock()
	for _, pid := range zombieChildren() {
		mu.Lock()
		own := ours[pid]
		mu.Unlock()
		if !own {
			var ws unix.WaitStatus
			unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		}
	}
}

// zombieChildren lists this process's children that have exited.
func zombieChildren() []int {
	self := strconv.Itoa(os.Getpid())
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// The command name may contain spaces; fields start after ")".
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 || f[0] != "Z" || f[1] != self {
			continue
		}
		if pid, err := strconv.Atoi(strings.Fields(s)[0]); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// Start starts cmd and registers it so that only cmd.Wait reaps it.
func Start(cmd *exec.Cmd) error {
	startMu.RLock()
	defer startMu.RUnlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	mu.Lock()
	ours[cmd.Process.Pid] = true
	mu.Unlock()
	return nil
}

// Wait waits for a command started with Start.
func Wait(cmd *exec.Cmd) error {
	err := cmd.Wait()
	mu.Lock()
	delete(ours, cmd.Process.Pid)
	mu.Unlock()
	return err
}

// Run starts cmd and waits for it.
func Run(cmd *exec.Cmd) error {
	if err := Start(cmd); err != nil {
		return err
	}
	return Wait(cmd)
}

// CombinedOutput runs cmd and returns its stdout and stderr together.
func CombinedOutput(cmd *exec.Cmd) ([]byte, error) {
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := Run(cmd)
	return b.Bytes(), err
}

// Output runs cmd and returns its stdout.
func Output(cmd *exec.Cmd) ([]byte, error) {
	var b bytes.Buffer
	cmd.Stdout = &b
	err := Run(cmd)
	return b.Bytes(), err
}
