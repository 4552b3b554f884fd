package agent

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// Retention of background processes. A process stays in the table while
// it runs, and after it exits until its exit status has been read (by an
// attach that reached the end, or a kill reply) plus statusGrace, so that
// other attachers racing the first still get it. At most maxExited exited
// processes are kept: beyond that the oldest go first, those already read
// before those not.
const (
	outputBufferBytes = 1 << 20
	statusGrace       = time.Minute
	maxExited         = 64
)

// procTable holds the agent's background processes by pid and tag. It
// outlives daemon connections: processes keep running while the daemon
// is away and can be reattached when it is back.
type procTable struct {
	mu       sync.Mutex
	byPID    map[int]*bgProc
	byTag    map[string]*bgProc // the newest process with each tag
	starting map[string]bool    // tags of processes being started
	now      func() time.Time
}

func newProcTable() *procTable {
	return &procTable{byPID: map[int]*bgProc{}, byTag: map[string]*bgProc{}, starting: map[string]bool{}, now: time.Now}
}

// start runs fork and registers the process it starts. The tag is
// reserved meanwhile, so two starts cannot both take it, without holding
// the table lock across the fork.
func (t *procTable) start(tag string, fork func() (*bgProc, error)) (*bgProc, error) {
	if err := t.reserve(tag); err != nil {
		return nil, err
	}
	p, err := fork()
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.starting, tag)
	if err != nil {
		return nil, err
	}
	// The pid was reaped and reused: the old entry can no longer be named.
	if old := t.byPID[p.pid]; old != nil {
		t.removeLocked(old)
	}
	t.byPID[p.pid] = p
	if tag != "" {
		t.byTag[tag] = p
	}
	return p, nil
}

func (t *procTable) reserve(tag string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweepLocked()
	if tag == "" {
		return nil
	}
	if old := t.byTag[tag]; old != nil && old.running() {
		return fmt.Errorf("tag %q is in use by running process %d: %w", tag, old.pid, errdefs.ErrConflict)
	}
	if t.starting[tag] {
		return fmt.Errorf("tag %q is in use by a process being started: %w", tag, errdefs.ErrConflict)
	}
	t.starting[tag] = true
	return nil
}

// get selects a process by pid, or by tag when pid is 0.
func (t *procTable) get(pid int, tag string) (*bgProc, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweepLocked()
	switch {
	case pid < 0:
		return nil, fmt.Errorf("pid %d is not valid: %w", pid, errdefs.ErrInvalidArgument)
	case pid > 0:
		if p := t.byPID[pid]; p != nil {
			return p, nil
		}
		return nil, fmt.Errorf("no background process with pid %d: %w", pid, errdefs.ErrNotFound)
	case tag != "":
		if p := t.byTag[tag]; p != nil {
			return p, nil
		}
		return nil, fmt.Errorf("no background process with tag %q: %w", tag, errdefs.ErrNotFound)
	}
	return nil, fmt.Errorf("a pid or tag is required: %w", errdefs.ErrInvalidArgument)
}

// list returns every process, oldest first.
func (t *procTable) list() []agentproto.ProcInfo {
	t.mu.Lock()
	t.sweepLocked()
	ps := make([]*bgProc, 0, len(t.byPID))
	for _, p := range t.byPID {
		ps = append(ps, p)
	}
	t.mu.Unlock()
	slices.SortFunc(ps, func(a, b *bgProc) int {
		if c := a.startedAt.Compare(b.startedAt); c != 0 {
			return c
		}
		return a.pid - b.pid
	})
	out := make([]agentproto.ProcInfo, len(ps))
	for i, p := range ps {
		out[i] = p.info()
	}
	return out
}

func (t *procTable) removeLocked(p *bgProc) {
	if t.byPID[p.pid] == p {
		delete(t.byPID, p.pid)
	}
	if p.tag != "" && t.byTag[p.tag] == p {
		delete(t.byTag, p.tag)
	}
}

// sweepLocked applies the retention rules. It runs on every table access
// rather than on a timer: an idle table costs nothing.
func (t *procTable) sweepLocked() {
	now := t.now()
	var exited []*bgProc
	for _, p := range t.byPID {
		st := p.retention()
		switch {
		case st.running:
		case !st.readAt.IsZero() && now.Sub(st.readAt) >= statusGrace:
			t.removeLocked(p)
		default:
			exited = append(exited, p)
		}
	}
	if len(exited) <= maxExited {
		return
	}
	slices.SortFunc(exited, func(a, b *bgProc) int {
		ra, rb := a.retention(), b.retention()
		if ra.read() != rb.read() {
			if ra.read() {
				return -1
			}
			return 1
		}
		return ra.exitedAt.Compare(rb.exitedAt)
	})
	for _, p := range exited[:len(exited)-maxExited] {
		t.removeLocked(p)
	}
}

// retentionState is what the sweep needs of a process.
type retentionState struct {
	running  bool
	exitedAt time.Time
	readAt   time.Time
}

func (r retentionState) read() bool { return !r.readAt.IsZero() }
