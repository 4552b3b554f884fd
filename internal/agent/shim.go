package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockdev/airlock/internal/errdefs"
)

// Every command the agent runs is started by a shim: the agent binary
// re-executed with shimArg. The shim makes itself a child subreaper
// (PR_SET_CHILD_SUBREAPER), starts the command and waits. Anything the
// command leaves behind (a double-forked, setsid'd daemon, a stopped job)
// is reparented to the shim instead of to PID 1, so the shim's subtree is
// always everything the command started and killing that subtree
// (killExec) leaves nothing behind. The shim reports the command's
// own exit at once and then stays, reaping leftover descendants, so a
// server started with `nohup srv &` keeps running after its exec returns
// and can still be killed as part of the tree. The shim exits when its last
// descendant has.
//
// Where PR_SET_CHILD_SUBREAPER fails (old gVisor releases such as runsc
// 20221219; current runsc and runc implement it, so there this path is
// unused) the shim adds a marker to the command's supplementary groups
// instead, a gid unique to the exec: every descendant inherits it and only
// a process with CAP_SETGID (one run as root) can drop it, so killExec
// finds the processes of a non-root exec wherever they were reparented.
//
// The shim also empties the capability bounding set of commands run as a
// non-root user (and drops CAP_SETPCAP from root's): with no_new_privs and
// an empty bounding set, nothing the command execs can regain a capability.
//
// The shim's descriptors: 0-2 /dev/null, 3-5 the command's stdin, stdout
// and stderr (closed in the shim once the command has them, so a finished
// command's pipes reach EOF), 6 a socket to the agent: the agent writes one
// shimSpec, the shim answers {"pid":N} or {"errno":N}, then {"status":W}
// when the command exits.
const shimArg = "__airlock_exec_shim"

const (
	shimStdio   = 3
	shimControl = 6
	// shimStartTimeout bounds how long the agent waits for the shim to
	// report the command started: exec of a static binary takes
	// milliseconds, seconds only on a machine that is badly overloaded.
	shimStartTimeout = 30 * time.Second
)

// shimSpec is what the shim runs.
type shimSpec struct {
	Path   string   `json:"path"`
	Argv   []string `json:"argv"`
	Env    []string `json:"env"`
	Dir    string   `json:"dir"`
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
	// SetCred is false when the command inherits the shim's identity (an
	// unprivileged agent in tests).
	SetCred bool `json:"set_cred"`
	// Nproc, if set, is the command's RLIMIT_NPROC.
	Nproc uint64 `json:"nproc,omitempty"`
	// MarkerGID is the exec's marker group, used if the shim cannot be a
	// subreaper.
	MarkerGID uint32 `json:"marker_gid,omitempty"`
	// Setsid starts the command in a new session (for a terminal, with
	// Setctty making fd 0 its controlling terminal); otherwise it gets its
	// own process group.
	Setsid  bool `json:"setsid,omitempty"`
	Setctty bool `json:"setctty,omitempty"`
}

type shimMsg struct {
	PID    int    `json:"pid,omitempty"`
	Marker uint32 `json:"marker,omitempty"` // the marker gid, when used
	Errno  int    `json:"errno,omitempty"`
	Status *int32 `json:"status,omitempty"`
}

// RunShimIfRequested runs the exec shim and exits when the process was
// started as one. main (and TestMain of tests that exec through an Agent)
// must call it first.
func RunShimIfRequested() {
	if len(os.Args) == 2 && os.Args[1] == shimArg {
		os.Exit(runShim())
	}
}

func runShim() int {
	// Bounding set changes and fork happen on this thread only: the
	// bounding set is per thread, and the child inherits its creator's.
	runtime.LockOSThread()
	closeOnExecAbove(shimStdio - 1)
	ctl := os.NewFile(shimControl, "shim-control")
	var spec shimSpec
	if err := json.NewDecoder(ctl).Decode(&spec); err != nil {
		return 2
	}
	var marker uint32
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil && spec.SetCred {
		marker = spec.MarkerGID
	}
	dropBoundingSet(!spec.SetCred || spec.UID != 0)
	if spec.Nproc > 0 {
		lim := unix.Rlimit{Cur: spec.Nproc, Max: spec.Nproc}
		if err := unix.Setrlimit(unix.RLIMIT_NPROC, &lim); err != nil {
			writeShimMsg(ctl, shimMsg{Errno: int(errnoOf(err))})
			return 2
		}
	}
	sys := &syscall.SysProcAttr{Setpgid: !spec.Setsid, Setsid: spec.Setsid, Setctty: spec.Setctty}
	if spec.SetCred {
		groups := spec.Groups
		if marker != 0 {
			groups = append(groups, marker)
		}
		sys.Credential = &syscall.Credential{Uid: spec.UID, Gid: spec.GID, Groups: groups}
	}
	// The command inherits the highest OOM score: when the sandbox runs
	// out of memory, the kernel kills its processes, not the agent's.
	restore := raiseOOMScore()
	pid, err := syscall.ForkExec(spec.Path, spec.Argv, &syscall.ProcAttr{
		Dir: spec.Dir, Env: spec.Env, Files: []uintptr{shimStdio, shimStdio + 1, shimStdio + 2}, Sys: sys,
	})
	restore()
	for fd := shimStdio; fd < shimControl; fd++ {
		syscall.Close(fd)
	}
	if err != nil {
		writeShimMsg(ctl, shimMsg{Errno: int(errnoOf(err))})
		return 2
	}
	writeShimMsg(ctl, shimMsg{PID: pid, Marker: marker})
	for {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0 // ECHILD: the whole tree is gone
		}
		if wpid == pid {
			st := int32(ws)
			writeShimMsg(ctl, shimMsg{Status: &st})
			ctl.Close()
		}
	}
}

// raiseOOMScore sets the process's oom_score_adj to the maximum and
// returns a function that puts the old value back (lowering it again is
// allowed down to the value a privileged process last set).
func raiseOOMScore() func() {
	const path = "/proc/self/oom_score_adj"
	old, err := os.ReadFile(path)
	if err != nil || os.WriteFile(path, []byte("1000"), 0) != nil {
		return func() {}
	}
	return func() { _ = os.WriteFile(path, old, 0) }
}

// closeOnExecAbove marks every descriptor above fd close-on-exec, so the
// command inherits exactly its stdio, whatever the agent itself inherited.
func closeOnExecAbove(fd int) {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil && n > fd {
			syscall.CloseOnExec(n)
		}
	}
}

// dropBoundingSet removes every capability from the calling thread's
// bounding set, or only CAP_SETPCAP. Without CAP_SETPCAP (an agent run
// unprivileged) this is a no-op.
func dropBoundingSet(all bool) {
	if !all {
		_ = unix.Prctl(unix.PR_CAPBSET_DROP, unix.CAP_SETPCAP, 0, 0, 0)
		return
	}
	for c := 0; c < 64; c++ {
		if c == unix.CAP_SETPCAP {
			continue // needed for the drops themselves: last
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err == unix.EINVAL {
			break // past the kernel's last capability
		}
	}
	_ = unix.Prctl(unix.PR_CAPBSET_DROP, unix.CAP_SETPCAP, 0, 0, 0)
}

func writeShimMsg(ctl *os.File, m shimMsg) {
	b, _ := json.Marshal(m)
	ctl.Write(append(b, '\n'))
}

func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EINVAL
}

// spawned is a command started under a shim.
type spawned struct {
	pid    int    // the command: its pid is also its process group (or session)
	shim   int    // the root of everything it started
	marker uint32 // its marker group, if the shim is not a subreaper
	exited <-chan unix.WaitStatus
}

// kill kills everything the command started. Call it only while the
// command runs (see runningProc), or the shim's pid may have been reused.
func (sp *spawned) kill() { killExec(sp.shim, sp.marker) }

// Marker gids: a range no distribution allocates, one per exec.
const (
	markerBase  = 2_000_000_000
	markerRange = 100_000_000
)

var markerSeq atomic.Uint32

func nextMarker() uint32 { return markerBase + markerSeq.Add(1)%markerRange }

// spawnOpts are per-start options of spawn.
type spawnOpts struct {
	Setsid, Setctty bool
}

// spawn starts spec under a shim with stdio as the command's fds 0, 1 and
// 2. It returns once the command runs, or with the exec error (ENOENT,
// EACCES, ...) the shim got starting it. The exited channel receives the
// command's wait status once: from the shim when the command exits, or the
// shim's own if the shim died first (killed with its tree).
func (a *Agent) spawn(spec *execSpec, stdio [3]*os.File, opts spawnOpts) (*spawned, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("shim socket: %w", err)
	}
	// Non-blocking on our side only, for read deadlines.
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, fmt.Errorf("shim socket: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "shim-control"), os.NewFile(uintptr(fds[1]), "shim-control")
	defer theirs.Close()
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		ours.Close()
		return nil, err
	}
	defer devnull.Close()

	ss := shimSpec{Path: spec.argv0, Argv: spec.argv, Env: spec.env, Dir: spec.cwd,
		Nproc: a.cfg.NprocLimit, MarkerGID: nextMarker(), Setsid: opts.Setsid, Setctty: opts.Setctty}
	if c := spec.acct.credential(); c != nil {
		ss.SetCred, ss.UID, ss.GID, ss.Groups = true, c.Uid, c.Gid, c.Groups
	}
	attr := &syscall.ProcAttr{
		Dir: "/",
		// The command's env is in the spec. One P keeps the shim at a few
		// threads, which count against the sandbox's pids limit.
		Env: []string{"GOMAXPROCS=1"},
		Files: []uintptr{devnull.Fd(), devnull.Fd(), devnull.Fd(),
			stdio[0].Fd(), stdio[1].Fd(), stdio[2].Fd(), theirs.Fd()},
		// Its own group, apart from the agent's and the command's.
		Sys: &syscall.SysProcAttr{Setpgid: true},
	}
	shimPid, shimExited, err := a.reaper.start(func() (int, error) {
		return syscall.ForkExec(a.cfg.ShimBinary, []string{a.cfg.ShimBinary, shimArg}, attr)
	})
	if err != nil {
		ours.Close()
		return nil, fmt.Errorf("start exec shim %s: %w", a.cfg.ShimBinary, err)
	}
	theirs.Close()

	dec := json.NewDecoder(ours)
	_ = ours.SetDeadline(time.Now().Add(shimStartTimeout))
	err = json.NewEncoder(ours).Encode(ss)
	var first shimMsg
	if err == nil {
		err = dec.Decode(&first)
	}
	_ = ours.SetDeadline(time.Time{})
	switch {
	case err != nil:
		killExec(shimPid, 0)
		ours.Close()
		// The shim only dies this early when the sandbox is out of pids
		// or memory (the Go runtime cannot start its threads).
		return nil, &kindError{msg: fmt.Sprintf("exec shim failed before starting the command (%v): the sandbox may be at its pids or memory limit", err),
			kind: errdefs.ErrResourceExhausted}
	case first.Errno != 0:
		ours.Close()
		return nil, syscall.Errno(first.Errno)
	}

	exited := make(chan unix.WaitStatus, 1)
	go func() {
		defer ours.Close()
		var m shimMsg
		if dec.Decode(&m) == nil && m.Status != nil {
			exited <- unix.WaitStatus(*m.Status)
			return
		}
		exited <- <-shimExited
	}()
	return &spawned{pid: first.PID, shim: shimPid, marker: first.Marker, exited: exited}, nil
}
