// Package sandbox owns the lifecycle of sandboxes: it validates requests,
// applies defaults and limits, persists records, drives the runtime drivers,
// keeps a connection to every sandbox's agent, enforces time-to-live and
// re-adopts or reclaims sandboxes after a daemon restart.
package sandbox

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// Store persists sandbox records.
type Store interface {
	PutSandbox(api.Sandbox) error
	GetSandbox(id string) (api.Sandbox, error)
	DeleteSandbox(id string) error
	ListSandboxes() ([]api.Sandbox, error)
}

// Templates resolves a template name to its root filesystem.
type Templates interface {
	RootFS(name string) (string, error)
}

// DefaultOwner owns every sandbox until tenants exist.
const DefaultOwner = "default"

// Manager is the sandbox lifecycle service.
type Manager struct {
	cfg       Config
	store     Store
	templates Templates
	drivers   map[string]Driver
	network   Network // nil: networking disabled
	log       *slog.Logger

	mu   sync.Mutex
	live map[string]*live

	stop context.CancelFunc
	wg   sync.WaitGroup
}

// New returns a manager. drivers maps runtime names (api.RuntimeGVisor,
// api.RuntimeRunc) to drivers; Config.DefaultRuntime must be one of them.
func New(cfg Config, store Store, templates Templates, drivers map[string]Driver, log *slog.Logger) (*Manager, error) {
	cfg = cfg.withDefaults()
	if _, ok := drivers[cfg.DefaultRuntime]; !ok {
		return nil, fmt.Errorf("default runtime %q is not available (have %v)", cfg.DefaultRuntime, slices.Sorted(maps.Keys(drivers)))
	}
	if log == nil {
		log = slog.Default()
	}
	return &Manager{cfg: cfg, store: store, templates: templates, drivers: drivers, log: log, live: map[string]*live{}}, nil
}

// Runtimes lists the available runtimes.
func (m *Manager) Runtimes() []string { return slices.Sorted(maps.Keys(m.drivers)) }

// Config returns the effective configuration.
func (m *Manager) Config() Config { return m.cfg }

// Start re-adopts or reclaims the sandboxes of a previous run, sweeps
// leftovers, and starts enforcing time-to-live. Call it once before serving.
func (m *Manager) Start(ctx context.Context) error {
	if err := m.recover(ctx); err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.stop = cancel
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.reapExpired(rctx)
	}()
	return nil
}

// Close stops background work and drops agent connections. Sandboxes keep
// running; a restarted daemon re-adopts them.
func (m *Manager) Close() {
	if m.stop != nil {
		m.stop()
	}
	m.mu.Lock()
	for _, l := range m.live {
		l.shutdown()
	}
	m.mu.Unlock()
	m.wg.Wait()
}

func newID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 12)
	rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "sb-" + string(b)
}

// Create starts a sandbox and returns once its agent answers.
func (m *Manager) Create(ctx context.Context, req api.CreateSandboxRequest) (api.Sandbox, error) {
	sb, err := m.cfg.resolve(req)
	if err != nil {
		return api.Sandbox{}, err
	}
	policy, err := m.resolveNetwork(req)
	if err != nil {
		return api.Sandbox{}, err
	}
	sb.Secrets = req.Secrets
	drv := m.drivers[sb.Runtime]
	rootfs, err := m.templates.RootFS(sb.Template)
	if err != nil {
		return api.Sandbox{}, fmt.Errorf("template %q: %w", sb.Template, err)
	}
	sb.ID = newID()
	sb.Owner = DefaultOwner
	sb.State = api.StateCreating
	sb.CreatedAt = time.Now().UTC()
	sb.ExpiresAt = sb.CreatedAt.Add(time.Duration(sb.TimeoutSeconds) * time.Second)
	// The record is written first so that a crash during start leaves
	// something the next daemon can reclaim.
	if err := m.store.PutSandbox(sb); err != nil {
		return api.Sandbox{}, fmt.Errorf("save sandbox: %w", err)
	}
	fail := func(err error) (api.Sandbox, error) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if derr := m.destroy(cctx, sb.ID, sb.Runtime); derr != nil {
			m.log.Error("clean up failed sandbox", "id", sb.ID, "err", derr)
		}
		return api.Sandbox{}, err
	}
	spec := m.spec(sb, rootfs)
	if err := m.attachNetwork(ctx, &sb, policy, &spec); err != nil {
		return fail(err)
	}
	if err := drv.Start(ctx, spec); err != nil {
		return fail(fmt.Errorf("%w: %w", errdefs.ErrUnavailable, err))
	}
	l := m.adopt(sb, drv)
	wctx, cancel := context.WithTimeout(ctx, m.cfg.AgentConnectTimeout)
	defer cancel()
	if _, err := l.agent(wctx); err != nil {
		return fail(fmt.Errorf("%w: sandbox agent did not connect: %w", errdefs.ErrUnavailable, err))
	}
	sb.State = api.StateRunning
	m.mu.Lock()
	l.rec.State = api.StateRunning
	m.mu.Unlock()
	if err := m.store.PutSandbox(sb); err != nil {
		return fail(fmt.Errorf("save sandbox: %w", err))
	}
	return sb, nil
}

func (m *Manager) spec(sb api.Sandbox, rootfs string) Spec {
	return Spec{
		ID: sb.ID, Template: sb.Template, TemplatePath: rootfs,
		CPUs: sb.CPUs, MemoryMB: sb.MemoryMB, DiskMB: sb.DiskMB, PidsLimit: sb.PidsLimit,
	}
}

// adopt registers a running sandbox and starts maintaining its agent
// connection.
func (m *Manager) adopt(sb api.Sandbox, drv Driver) *live {
	ctx, cancel := context.WithCancel(context.Background())
	l := newLive(sb, drv, cancel)
	m.mu.Lock()
	m.live[sb.ID] = l
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		l.connectLoop(ctx, m.log)
	}()
	return l
}

// Get returns a sandbox.
func (m *Manager) Get(ctx context.Context, id string) (api.Sandbox, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.live[id]
	if !ok {
		return api.Sandbox{}, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return l.rec, nil
}

// List returns the sandboxes whose labels include every pair in labels,
// oldest first.
func (m *Manager) List(ctx context.Context, labels map[string]string) []api.Sandbox {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []api.Sandbox{}
	for _, l := range m.live {
		if matchLabels(l.rec.Labels, labels) {
			out = append(out, l.rec)
		}
	}
	slices.SortFunc(out, func(a, b api.Sandbox) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return compareStrings(a.ID, b.ID)
	})
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func matchLabels(have, want map[string]string) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return false
		}
	}
	return true
}

// Delete destroys a sandbox. Deleting a sandbox that does not exist is not
// an error, so clients can retry.
func (m *Manager) Delete(ctx context.Context, id string) error {
	m.mu.Lock()
	l, ok := m.live[id]
	m.mu.Unlock()
	runtime := ""
	if ok {
		runtime = l.rec.Runtime
	} else if rec, err := m.store.GetSandbox(id); err == nil {
		runtime = rec.Runtime
	} else {
		return nil
	}
	return m.destroy(ctx, id, runtime)
}

func (m *Manager) destroy(ctx context.Context, id, runtime string) error {
	m.mu.Lock()
	l, ok := m.live[id]
	delete(m.live, id)
	m.mu.Unlock()
	if ok {
		l.shutdown()
	}
	if drv, ok := m.drivers[runtime]; ok {
		if err := drv.Destroy(ctx, id); err != nil {
			return fmt.Errorf("destroy sandbox %s: %w", id, err)
		}
	}
	if err := m.detachNetwork(ctx, id); err != nil {
		return fmt.Errorf("destroy sandbox %s network: %w", id, err)
	}
	if err := m.store.DeleteSandbox(id); err != nil {
		return fmt.Errorf("forget sandbox %s: %w", id, err)
	}
	return nil
}

// SetTimeout makes the sandbox expire d from now.
func (m *Manager) SetTimeout(ctx context.Context, id string, seconds int64) (api.Sandbox, error) {
	if err := m.cfg.checkTimeout(seconds); err != nil {
		return api.Sandbox{}, err
	}
	m.mu.Lock()
	l, ok := m.live[id]
	if !ok {
		m.mu.Unlock()
		return api.Sandbox{}, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	l.rec.TimeoutSeconds = seconds
	l.rec.ExpiresAt = time.Now().UTC().Add(time.Duration(seconds) * time.Second)
	rec := l.rec
	m.mu.Unlock()
	if err := m.store.PutSandbox(rec); err != nil {
		return api.Sandbox{}, fmt.Errorf("save sandbox: %w", err)
	}
	return rec, nil
}

// Agent returns a client for the sandbox's agent, waiting briefly if the
// connection is being re-established.
func (m *Manager) Agent(ctx context.Context, id string) (*agentproto.Client, error) {
	m.mu.Lock()
	l, ok := m.live[id]
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if err := m.checkStopped(ctx, id, l); err != nil {
		return nil, err
	}
	// Wait for the agent in slices, asking the runtime between them whether
	// the sandbox died meanwhile, so a dead sandbox fails in about a second
	// rather than after the whole connect timeout.
	deadline := time.Now().Add(m.cfg.AgentConnectTimeout)
	for {
		wctx, cancel := context.WithDeadline(ctx, minTime(deadline, time.Now().Add(time.Second)))
		c, err := l.agent(wctx)
		cancel()
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if serr := m.checkStopped(ctx, id, l); serr != nil {
			return nil, serr
		}
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("%w: sandbox %s agent is not connected: %w", errdefs.ErrUnavailable, id, err)
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// reapExpired deletes sandboxes whose time-to-live has passed.
func (m *Manager) reapExpired(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		m.mu.Lock()
		var expired []string
		for id, l := range m.live {
			if l.rec.State != api.StateCreating && now.After(l.rec.ExpiresAt) {
				expired = append(expired, id)
			}
		}
		m.mu.Unlock()
		for _, id := range expired {
			m.log.Info("sandbox expired", "id", id)
			dctx, cancel := context.WithTimeout(ctx, time.Minute)
			if err := m.Delete(dctx, id); err != nil && !errors.Is(err, context.Canceled) {
				m.log.Error("delete expired sandbox", "id", id, "err", err)
			}
			cancel()
		}
	}
}
