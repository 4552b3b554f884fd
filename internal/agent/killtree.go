package agent

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// killTree SIGKILLs the process group of pid and every descendant of pid,
// including those that moved to another group or session (setsid, daemons
// started with their own group), so nothing an exec started outlives it.
//
// A double-forked daemon is reparented away from the command, out of
// reach of this walk: for a process started by spawn (shim.go) use
// spawned.kill, which kills all the exec's processes wherever they went.
// runningProc.kill picks the right one.
//
// Descendants are found through /proc ppid links. Killing a parent breaks
// those links (its children are reparented), and processes keep forking
// while we look, so the tree is first frozen with SIGSTOP, re-scanning
// until no new member appears, and only then killed. A stopped process
// still dies from SIGKILL.
func killTree(pid int) {
	tree := map[int]bool{pid: true}
	for round := 0; round < 8; round++ {
		_ = unix.Kill(-pid, unix.SIGSTOP)
		grew := false
		for p := range descendants(pid) {
			if !tree[p] {
				tree[p] = true
				grew = true
			}
			_ = unix.Kill(p, unix.SIGSTOP)
		}
		if !grew && round > 0 {
			break
		}
	}
	_ = unix.Kill(-pid, unix.SIGKILL)
	for p := range tree {
		_ = unix.Kill(p, unix.SIGKILL)
	}
}

// descendants returns the pids below root (root excluded) in a snapshot of
// /proc.
func descendants(root int) map[int]bool {
	children := map[int][]int{}
	for pid, ppid := range parentLinks() {
		children[ppid] = append(children[ppid], pid)
	}
	out := map[int]bool{}
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !out[c] && c != root {
				out[c] = true
				queue = append(queue, c)
			}
		}
	}
	return out
}

// parentLinks maps every visible pid to its parent pid. Processes that
// vanish mid-scan are skipped.
func parentLinks() map[int]int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	links := make(map[int]int, len(names))
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if ppid, ok := readPPID(pid); ok {
			links[pid] = ppid
		}
	}
	return links
}

// readPPID parses the ppid out of /proc/<pid>/stat: "pid (comm) state ppid
// ...". comm may itself contain spaces and parentheses, so fields are
// counted from the last ')'.
func readPPID(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	fields := bytes.Fields(b[i+1:])
	if len(fields) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(string(fields[1]))
	if err != nil {
		return 0, false
	}
	return ppid, true
}
