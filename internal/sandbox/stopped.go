package sandbox

import (
	"context"
	"fmt"

	"github.com/airlockdev/airlock/internal/errdefs"
)

// checkStopped fails at once, instead of after AgentConnectTimeout, when
// the sandbox's agent is not connected because the sandbox itself is no
// longer running: its runtime died (under gVisor, the OOM killer's doing
// when the sandbox outgrew its memory limit) or was killed from outside.
// The sandbox can still be deleted.
func (m *Manager) checkStopped(ctx context.Context, id string, l *live) error {
	l.mu.Lock()
	connected := l.client != nil
	l.mu.Unlock()
	if connected {
		return nil
	}
	st, err := l.drv.Status(ctx, id)
	if err != nil || st == StatusRunning {
		return nil
	}
	reason := "its runtime exited"
	if c, ok := l.drv.(OOMCounter); ok {
		if n, ok := c.OOMKills(id); ok && n > 0 {
			reason = "it ran out of memory and the kernel's OOM killer stopped it"
		}
	}
	return fmt.Errorf("sandbox %s is not running: %s; delete it: %w", id, reason, errdefs.ErrConflict)
}
