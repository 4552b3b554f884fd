package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// LimitHits counts how often the kernel enforced a sandbox's limits.
type LimitHits struct {
	OOMKills uint64 // processes killed by the OOM killer at the memory limit
	PidsMax  uint64 // forks refused at the pids limit
}

// LimitCounter is an optional Driver capability: the sandbox's LimitHits
// so far (ok is false if the driver cannot tell).
type LimitCounter interface {
	LimitHits(id string) (h LimitHits, ok bool)
}

// limitWatch tells whether the kernel enforced a sandbox's limits during
// an exec.
type limitWatch struct {
	c      LimitCounter
	sb     api.Sandbox
	before LimitHits
}

func (m *Manager) watchLimits(sb api.Sandbox) *limitWatch {
	c, ok := m.drivers[sb.Runtime].(LimitCounter)
	if !ok {
		return nil
	}
	h, ok := c.LimitHits(sb.ID)
	if !ok {
		return nil
	}
	return &limitWatch{c: c, sb: sb, before: h}
}

// since returns the hits since the watch began.
func (w *limitWatch) since() LimitHits {
	if w == nil {
		return LimitHits{}
	}
	h, ok := w.c.LimitHits(w.sb.ID)
	if !ok {
		return LimitHits{}
	}
	return LimitHits{OOMKills: h.OOMKills - w.before.OOMKills, PidsMax: h.PidsMax - w.before.PidsMax}
}

// note reports enforced limits in an exec's outcome. A command that
// failed while the sandbox's memory cgroup killed a process was OOM
// killed (the process itself, or the shell running it, reports the kill).
// An exec that failed because its sandbox stopped says why: under gVisor
// the OOM killer's victim, or a thread the pids limit refused, belongs to
// the sandbox's kernel, which takes the whole sandbox down (the daemon
// and other sandboxes are untouched).
func (w *limitWatch) note(ctx context.Context, m *Manager, st agentproto.ExitStatus, err error) (agentproto.ExitStatus, error) {
	hits := w.since()
	if err == nil {
		st.OOMKilled = hits.OOMKills > 0 && !st.TimedOut && st.Code != 0
		return st, nil
	}
	if w == nil {
		return st, err
	}
	serr := m.stoppedError(ctx, w.sb.ID, m.drivers[w.sb.Runtime], hits)
	// The agent's stream can break before the runtime reports its sandbox
	// stopped (runsc says "running" until the killed sentry is reaped), so
	// a broken stream waits briefly for the runtime to catch up.
	for deadline := time.Now().Add(stopSettle); serr == nil && errors.Is(err, errdefs.ErrUnavailable) && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return st, err
		case <-time.After(100 * time.Millisecond):
		}
		serr = m.stoppedError(ctx, w.sb.ID, m.drivers[w.sb.Runtime], w.since())
	}
	if serr != nil {
		return st, fmt.Errorf("%w (exec: %v)", serr, err)
	}
	return st, err
}

// stopSettle bounds how long a broken exec waits for the runtime to
// report that its sandbox stopped.
const stopSettle = 2 * time.Second

// stoppedError returns an error when the sandbox is no longer running,
// naming the limit that stopped it if one was hit, else nil.
func (m *Manager) stoppedError(ctx context.Context, id string, drv Driver, hits LimitHits) error {
	st, err := drv.Status(ctx, id)
	if err != nil || st == StatusRunning {
		return nil
	}
	m.markStopped(id)
	if c, ok := drv.(LimitCounter); ok && hits == (LimitHits{}) {
		hits, _ = c.LimitHits(id)
	}
	switch {
	case hits.OOMKills > 0:
		return fmt.Errorf("sandbox %s is not running: it ran out of memory and the kernel's OOM killer stopped it; delete it: %w", id, errdefs.ErrResourceExhausted)
	case hits.PidsMax > 0:
		return fmt.Errorf("sandbox %s is not running: it reached its pids limit, which its runtime does not survive; delete it: %w", id, errdefs.ErrResourceExhausted)
	}
	return fmt.Errorf("sandbox %s is not running: its runtime exited; delete it: %w", id, errdefs.ErrConflict)
}

// checkStopped fails at once, instead of after AgentConnectTimeout, when
// the sandbox's agent is not connected because the sandbox itself is no
// longer running. The sandbox can still be deleted.
func (m *Manager) checkStopped(ctx context.Context, id string, l *live) error {
	l.mu.Lock()
	connected := l.client != nil
	l.mu.Unlock()
	if connected {
		return nil
	}
	return m.stoppedError(ctx, id, l.drv, LimitHits{})
}

// markStopped records that a sandbox's runtime is no longer running, so
// listings say so; the sandbox stays until deleted or expired.
func (m *Manager) markStopped(id string) {
	m.mu.Lock()
	l, ok := m.live[id]
	if !ok || l.rec.State == api.StateStopped {
		m.mu.Unlock()
		return
	}
	l.rec.State = api.StateStopped
	rec := l.rec
	m.mu.Unlock()
	if err := m.store.PutSandbox(rec); err != nil {
		m.log.Warn("save stopped sandbox", "id", id, "err", err)
	}
}
