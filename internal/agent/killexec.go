package agent

import (
	"bytes"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// killExecTimeout bounds killExec: processes stuck in the kernel (D
// state) cannot be waited for forever.
const killExecTimeout = 5 * time.Second

// killExec kills everything an exec started under the shim shim: every
// live descendant of the shim and, when marker is set (runtimes without
// PR_SET_CHILD_SUBREAPER, see shim.go), every process carrying the marker
// group and their descendants. The shim goes last: while it lives, it is
// the subreaper that catches the orphans of the processes being killed,
// so the next round finds them. Each round freezes the members with
// SIGSTOP, rescanning until no new one appears (a fork bomb stops
// growing), then kills them all; rounds repeat until none is left.
func killExec(shim int, marker uint32) {
	deadline := time.Now().Add(killExecTimeout)
	for time.Now().Before(deadline) {
		members := execMembers(shim, marker)
		if len(members) == 0 {
			break
		}
		for i := 0; i < 8; i++ {
			for p := range members {
				_ = unix.Kill(p, unix.SIGSTOP)
			}
			grew := false
			for p := range execMembers(shim, marker) {
				if !members[p] {
					members[p], grew = true, true
				}
			}
			if !grew {
				break
			}
		}
		for p := range members {
			_ = unix.Kill(p, unix.SIGKILL)
		}
		time.Sleep(time.Millisecond) // let the shim reap them
	}
	_ = unix.Kill(shim, unix.SIGKILL)
}

// execMembers returns the live (non-zombie) processes of an exec, the shim
// itself excluded.
func execMembers(shim int, marker uint32) map[int]bool {
	procs := scanProcs(marker != 0)
	children := map[int][]int{}
	for pid, p := range procs {
		children[p.ppid] = append(children[p.ppid], pid)
	}
	out := map[int]bool{}
	var walk func(int)
	walk = func(root int) {
		for _, c := range children[root] {
			if !out[c] && c != shim {
				out[c] = true
				walk(c)
			}
		}
	}
	walk(shim)
	if marker != 0 {
		for pid, p := range procs {
			if p.marked(marker) && !out[pid] && pid != shim {
				out[pid] = true
				walk(pid)
			}
		}
	}
	for pid := range out {
		if procs[pid].zombie {
			delete(out, pid)
		}
	}
	return out
}

type procEntry struct {
	ppid   int
	zombie bool
	groups []byte // the Groups: line of status, when read
}

func (p procEntry) marked(gid uint32) bool {
	want := []byte(strconv.FormatUint(uint64(gid), 10))
	for _, g := range bytes.Fields(p.groups) {
		if bytes.Equal(g, want) {
			return true
		}
	}
	return false
}

// scanProcs reads every process's parent and state, and its supplementary
// groups if asked. Processes that vanish mid-scan are skipped.
func scanProcs(withGroups bool) map[int]procEntry {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	out := make(map[int]procEntry, len(names))
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ...": comm may hold anything, so fields
		// are counted from the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, err := strconv.Atoi(string(f[1]))
		if err != nil {
			continue
		}
		e := procEntry{ppid: ppid, zombie: string(f[0]) == "Z" || string(f[0]) == "X"}
		if withGroups {
			if st, err := os.ReadFile("/proc/" + name + "/status"); err == nil {
				if _, rest, ok := bytes.Cut(st, []byte("\nGroups:")); ok {
					e.groups, _, _ = bytes.Cut(rest, []byte("\n"))
				}
			}
		}
		out[pid] = e
	}
	return out
}
