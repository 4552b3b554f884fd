package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/airlockdev/airlock/api"
)

// recover re-adopts the sandboxes a previous daemon left running and
// reclaims everything else, so that nothing is orphaned by a crash.
func (m *Manager) recover(ctx context.Context) error {
	recs, err := m.store.ListSandboxes()
	if err != nil {
		return fmt.Errorf("load sandboxes: %w", err)
	}
	keep := map[string]bool{}
	now := time.Now()
	statuses := statusCache{}
	for _, rec := range recs {
		drv, ok := m.drivers[rec.Runtime]
		if !ok {
			m.log.Warn("reclaiming sandbox of unavailable runtime", "id", rec.ID, "runtime", rec.Runtime)
			m.store.DeleteSandbox(rec.ID)
			continue
		}
		st, err := statuses.of(ctx, rec.Runtime, drv, rec.ID)
		if err != nil || st != StatusRunning || now.After(rec.ExpiresAt) {
			m.log.Info("reclaiming sandbox", "id", rec.ID, "status", st, "err", err)
			if err := m.destroy(ctx, rec.ID, rec.Runtime); err != nil {
				m.log.Error("reclaim sandbox", "id", rec.ID, "err", err)
			}
			continue
		}
		keep[rec.ID] = true
		rec.State = api.StateRunning
		l := m.adopt(rec, drv)
		m.log.Info("re-adopting sandbox", "id", rec.ID)
		// An agent that does not come back is reclaimed; exec requests
		// meanwhile wait for it.
		go func() {
			wctx, cancel := context.WithTimeout(context.Background(), m.cfg.AgentConnectTimeout)
			defer cancel()
			if _, err := l.agent(wctx); err != nil {
				m.log.Error("re-adopted sandbox agent did not reconnect, reclaiming", "id", rec.ID, "err", err)
				dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				m.destroy(dctx, rec.ID, rec.Runtime)
			}
		}()
	}
	for _, id := range m.readoptNetworks(ctx, recs, keep) {
		delete(keep, id)
		m.mu.Lock()
		l := m.live[id]
		m.mu.Unlock()
		if err := m.destroy(ctx, id, l.rec.Runtime); err != nil {
			m.log.Error("reclaim sandbox", "id", id, "err", err)
		}
	}
	var errs []error
	for name, drv := range m.drivers {
		sw, ok := drv.(Sweeper)
		if !ok {
			continue
		}
		removed, err := sw.Sweep(ctx, keep)
		if len(removed) > 0 {
			m.log.Info("swept leftover sandboxes", "runtime", name, "ids", removed)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("sweep %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// statusCache asks each driver that can list for all its statuses once.
type statusCache map[string]map[string]Status

func (c statusCache) of(ctx context.Context, runtime string, drv Driver, id string) (Status, error) {
	sl, ok := drv.(StatusLister)
	if !ok {
		return drv.Status(ctx, id)
	}
	all, ok := c[runtime]
	if !ok {
		var err error
		if all, err = sl.Statuses(ctx); err != nil {
			return StatusMissing, err
		}
		c[runtime] = all
	}
	return all[id], nil
}
