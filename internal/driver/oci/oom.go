package oci

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/airlockdev/airlock/internal/sandbox"
)

var _ sandbox.OOMCounter = (*Driver)(nil)

// OOMKills reads how many processes the kernel's OOM killer has killed in
// the sandbox's memory cgroup: the oom_kill counter of memory.oom_control
// (cgroup v1) or memory.events (v2). Under runc those are the sandbox's
// own processes; under gVisor, the processes of the sandbox's kernel.
func (d *Driver) OOMKills(id string) (uint64, bool) {
	rel := filepath.Join("airlock", id)
	for _, f := range []string{
		filepath.Join(cgroupRoot, "memory", rel, "memory.oom_control"),
		filepath.Join(cgroupRoot, rel, "memory.events"),
	} {
		if n, ok := readCounter(f, "oom_kill"); ok {
			return n, true
		}
	}
	return 0, false
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
