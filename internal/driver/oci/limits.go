package oci

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/airlockdev/airlock/internal/sandbox"
)

var _ sandbox.LimitCounter = (*Driver)(nil)

// LimitHits reads how often the kernel enforced the sandbox's cgroup
// limits: oom_kill of memory.oom_control (cgroup v1) or memory.events
// (v2), and the "max" count of pids.events (forks refused). Under runc
// those are the sandbox's own processes; under gVisor, the processes of
// the sandbox's kernel.
func (d *Driver) LimitHits(id string) (sandbox.LimitHits, bool) {
	rel := filepath.Join("airlock", id)
	var h sandbox.LimitHits
	ok := false
	for _, f := range []string{
		filepath.Join(cgroupRoot, "memory", rel, "memory.oom_control"),
		filepath.Join(cgroupRoot, rel, "memory.events"),
	} {
		if n, found := readCounter(f, "oom_kill"); found {
			h.OOMKills, ok = n, true
			break
		}
	}
	for _, f := range []string{
		filepath.Join(cgroupRoot, "pids", rel, "pids.events"),
		filepath.Join(cgroupRoot, rel, "pids.events"),
	} {
		if n, found := readCounter(f, "max"); found {
			h.PidsMax, ok = n, true
			break
		}
	}
	return h, ok
}

// readCounter reads "key value" out of a cgroup file of such lines.
func readCounter(path, key string) (uint64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
