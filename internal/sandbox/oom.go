package sandbox

import (
	"fmt"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// OOMCounter is an optional Driver capability: the number of processes
// the kernel's OOM killer has killed in a sandbox so far (ok is false if
// the driver cannot tell).
type OOMCounter interface {
	OOMKills(id string) (n uint64, ok bool)
}

// oomWatch tells whether the OOM killer struck a sandbox during an exec.
type oomWatch struct {
	c      OOMCounter
	id     string
	before uint64
}

func (m *Manager) watchOOM(sb api.Sandbox) *oomWatch {
	c, ok := m.drivers[sb.Runtime].(OOMCounter)
	if !ok {
		return nil
	}
	n, ok := c.OOMKills(sb.ID)
	if !ok {
		return nil
	}
	return &oomWatch{c: c, id: sb.ID, before: n}
}

func (w *oomWatch) struck() bool {
	if w == nil {
		return false
	}
	n, ok := w.c.OOMKills(w.id)
	return ok && n > w.before
}

// noteOOM reports an OOM kill in an exec's outcome. A command killed by
// SIGKILL while the sandbox's memory cgroup killed a process was OOM
// killed. An exec that failed because the agent went away while the OOM
// killer struck lost its sandbox to it: under gVisor the kill lands on a
// process of the sandbox's kernel, which takes the whole sandbox down
// (the daemon and other sandboxes are untouched); the error says so.
func (w *oomWatch) noteOOM(sb api.Sandbox, st agentproto.ExitStatus, err error) (agentproto.ExitStatus, error) {
	if err == nil && st.Signal == "KILL" && !st.TimedOut && w.struck() {
		st.OOMKilled = true
	}
	if err != nil && w.struck() {
		err = fmt.Errorf("sandbox %s ran out of memory (memory_mb %d) and the kernel's OOM killer stopped it (%v): %w",
			sb.ID, sb.MemoryMB, err, errdefs.ErrResourceExhausted)
	}
	return st, err
}
