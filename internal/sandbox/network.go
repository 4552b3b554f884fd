package sandbox

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/errdefs"
	"github.com/airlockdev/airlock/internal/netpolicy"
)

// Network gives sandboxes their network: namespace, interface, firewall,
// DNS, egress proxy and secrets. The Manager uses it for every sandbox
// whose policy lets anything out; mode none needs none of it.
type Network interface {
	// Attach sets up a sandbox's network before its runtime starts.
	Attach(ctx context.Context, req NetworkRequest) (*NetworkAttachment, error)
	// Readopt resumes serving a running sandbox's network after a restart.
	Readopt(ctx context.Context, id string, p netpolicy.Policy) error
	// SetPolicy changes an attached sandbox's policy.
	SetPolicy(ctx context.Context, id string, p netpolicy.Policy) error
	// Detach removes everything Attach made; detaching twice is fine.
	Detach(ctx context.Context, id string) error
	// Sweep detaches sandboxes not in keep (leftovers of a crash).
	Sweep(ctx context.Context, keep map[string]bool) ([]string, error)
	// Pool is the sandbox address pool, which no allowlist may name.
	Pool() netip.Prefix
}

// NetworkRequest is what Attach needs.
type NetworkRequest struct {
	ID           string
	Policy       netpolicy.Policy
	Secrets      []string // names of registered secrets
	TemplatePath string   // root filesystem, for its CA bundle
}

// NetworkAttachment is what a driver and the sandbox's environment get.
type NetworkAttachment struct {
	NetNSPath string            // network namespace the runtime joins
	Mounts    []BindMount       // read-only files placed in the sandbox
	Env       map[string]string // secret placeholders, CA bundle variables
	Address   string
	Gateway   string
}

// BindMount is a host file bind-mounted read-only into a sandbox.
type BindMount struct{ Source, Destination string }

// UseNetwork enables networked sandboxes. Call it before Start.
func (m *Manager) UseNetwork(n Network) { m.network = n }

// resolveNetwork validates the network and secrets of a create request.
func (m *Manager) resolveNetwork(req api.CreateSandboxRequest) (netpolicy.Policy, error) {
	var pool netip.Prefix
	if m.network != nil {
		pool = m.network.Pool()
	}
	p, err := netpolicy.Parse(req.Network, pool)
	if err != nil {
		return p, err
	}
	if p.Networked() && m.network == nil {
		return p, fmt.Errorf("%w: this daemon has sandbox networking disabled; only network mode %q is available", errdefs.ErrInvalidArgument, api.NetworkNone)
	}
	if len(req.Secrets) > 0 && !p.Networked() {
		return p, invalid("secrets need network mode %q or %q: a sandbox without a network cannot use them", api.NetworkAllowlist, api.NetworkOpen)
	}
	seen := map[string]bool{}
	for _, s := range req.Secrets {
		if seen[s] {
			return p, invalid("secret %q is listed twice", s)
		}
		seen[s] = true
		if _, clash := req.Env[s]; clash {
			return p, invalid("secret %q clashes with an env variable of the same name", s)
		}
	}
	return p, nil
}

// attachNetwork sets up a networked sandbox's network and records it in sb
// and spec.
func (m *Manager) attachNetwork(ctx context.Context, sb *api.Sandbox, p netpolicy.Policy, spec *Spec) error {
	sb.Network = api.SandboxNetwork{Mode: p.Mode, Allow: p.API().Allow}
	if !p.Networked() {
		return nil
	}
	att, err := m.network.Attach(ctx, NetworkRequest{ID: sb.ID, Policy: p, Secrets: sb.Secrets, TemplatePath: spec.TemplatePath})
	if err != nil {
		return err
	}
	sb.Network.Address, sb.Network.Gateway = att.Address, att.Gateway
	if len(att.Env) > 0 {
		env := map[string]string{}
		maps.Copy(env, sb.Env)
		maps.Copy(env, att.Env)
		sb.Env = env
	}
	spec.Network = att
	return nil
}

// SetNetworkPolicy changes a running sandbox's egress policy. A sandbox
// created without a network cannot get one: its runtime has no interface
// to give it.
func (m *Manager) SetNetworkPolicy(ctx context.Context, id string, req api.NetworkPolicy) (api.Sandbox, error) {
	var pool netip.Prefix
	if m.network != nil {
		pool = m.network.Pool()
	}
	p, err := netpolicy.Parse(&req, pool)
	if err != nil {
		return api.Sandbox{}, err
	}
	m.mu.Lock()
	l, ok := m.live[id]
	var rec api.Sandbox
	if ok {
		rec = l.rec
	}
	m.mu.Unlock()
	if !ok {
		return api.Sandbox{}, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if rec.Network.Address == "" || m.network == nil {
		return api.Sandbox{}, fmt.Errorf("%w: sandbox %s was created with network mode none and has no network interface; "+
			"create it with mode %q or %q (switching to mode none later blocks everything)", errdefs.ErrConflict, id, api.NetworkAllowlist, api.NetworkOpen)
	}
	if err := m.network.SetPolicy(ctx, id, p); err != nil {
		return api.Sandbox{}, err
	}
	m.mu.Lock()
	if l, ok := m.live[id]; ok {
		l.rec.Network.Mode, l.rec.Network.Allow = p.Mode, p.API().Allow
		rec = l.rec
	}
	m.mu.Unlock()
	if err := m.store.PutSandbox(rec); err != nil {
		return api.Sandbox{}, fmt.Errorf("save sandbox: %w", err)
	}
	return rec, nil
}

// recordPolicy rebuilds a stored sandbox's policy.
func (m *Manager) recordPolicy(rec api.Sandbox) (netpolicy.Policy, error) {
	return netpolicy.Parse(&api.NetworkPolicy{Mode: rec.Network.Mode, Allow: rec.Network.Allow}, m.network.Pool())
}

// readoptNetworks resumes the networks of re-adopted sandboxes and sweeps
// the rest. It returns the ids whose network could not be resumed.
func (m *Manager) readoptNetworks(ctx context.Context, recs []api.Sandbox, keep map[string]bool) []string {
	if m.network == nil {
		return nil
	}
	var broken []string
	for _, rec := range recs {
		if !keep[rec.ID] || rec.Network.Address == "" {
			continue
		}
		p, err := m.recordPolicy(rec)
		if err == nil {
			err = m.network.Readopt(ctx, rec.ID, p)
		}
		if err != nil {
			m.log.Error("resume sandbox network, reclaiming sandbox", "id", rec.ID, "err", err)
			broken = append(broken, rec.ID)
		}
	}
	netKeep := maps.Clone(keep)
	for _, id := range broken {
		delete(netKeep, id)
	}
	removed, err := m.network.Sweep(ctx, netKeep)
	if len(removed) > 0 {
		m.log.Info("swept leftover sandbox networks", "ids", slices.Sorted(slices.Values(removed)))
	}
	if err != nil {
		m.log.Error("sweep sandbox networks", "err", err)
	}
	return broken
}

// detachNetwork removes a sandbox's network, if it has one.
func (m *Manager) detachNetwork(ctx context.Context, id string) error {
	if m.network == nil {
		return nil
	}
	return m.network.Detach(ctx, id)
}
