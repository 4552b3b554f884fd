// Package network gives each networked sandbox its network: a namespace
// and veth pair with an address from the operator's pool (internal/netns),
// its own nftables table, a DNS forwarder and an egress proxy on the host
// end of its link (internal/egress), and its secrets' placeholders and CA.
// It keeps per-sandbox state under DATA/network/ID so that a restarted
// daemon resumes or sweeps every piece.
package network

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/airlockdev/airlock/internal/egress"
	"github.com/airlockdev/airlock/internal/errdefs"
	"github.com/airlockdev/airlock/internal/netns"
	"github.com/airlockdev/airlock/internal/netpolicy"
	"github.com/airlockdev/airlock/internal/sandbox"
)

// DefaultPool is the default sandbox address pool: one /30 per sandbox.
var DefaultPool = netip.MustParsePrefix("10.89.0.0/16")

// Config configures sandbox networking.
type Config struct {
	Dir        string       // per-sandbox state: DATA/network
	Pool       netip.Prefix // sandbox addresses (default DefaultPool)
	DNSServers []string     // upstream DNS (default: the host's resolv.conf)
	// ExtraRootCAs (PEM) are trusted for upstream TLS besides the system's.
	ExtraRootCAs []byte
	// Disabled refuses new networked sandboxes; existing ones are still
	// resumed, changed and cleaned up.
	Disabled bool
	Log      *slog.Logger
}

// Secrets looks up registered secrets.
type Secrets interface {
	Value(name string) (value string, hosts []string, err error)
}

// Manager implements sandbox.Network.
type Manager struct {
	cfg     Config
	secrets Secrets
	egress  egress.Config
	hosts   hostAddrs

	mu     sync.Mutex
	active map[string]*attached
}

var _ sandbox.Network = (*Manager)(nil)

// attached is a sandbox whose network this daemon serves.
type attached struct {
	st                 state
	sb                 *egress.Sandbox
	proxy              *egress.Proxy
	dns                *egress.DNS
	proxyPort, dnsPort uint16
}

// New checks the host can do sandbox networking (nft is installed) and
// returns a manager.
func New(cfg Config, secrets Secrets) (*Manager, error) {
	if !cfg.Pool.IsValid() {
		cfg.Pool = DefaultPool
	}
	cfg.Pool = cfg.Pool.Masked()
	if !cfg.Pool.Addr().Is4() || cfg.Pool.Bits() > 28 {
		return nil, fmt.Errorf("sandbox network pool %s must be an IPv4 prefix of /28 or larger", cfg.Pool)
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if err := checkTools(); err != nil {
		return nil, err
	}
	resolver, err := egress.NewResolver(cfg.DNSServers)
	if err != nil {
		return nil, err
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if len(cfg.ExtraRootCAs) > 0 && !roots.AppendCertsFromPEM(cfg.ExtraRootCAs) {
		return nil, errors.New("extra egress root CAs: no PEM certificate found")
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", cfg.Dir, err)
	}
	m := &Manager{cfg: cfg, secrets: secrets, active: map[string]*attached{}}
	m.egress = egress.Config{Resolver: resolver, Env: m.env, RootCAs: roots, Log: cfg.Log}
	return m, nil
}

// Pool is the sandbox address pool.
func (m *Manager) Pool() netip.Prefix { return m.cfg.Pool }

func (m *Manager) env() netpolicy.Env {
	return netpolicy.Env{Pool: m.cfg.Pool, Host: m.hosts.get()}
}

// Names of a sandbox's host-side objects, derived from its id so that
// they can be removed even when its state file is lost. Interface names
// are at most 15 bytes.
func hostIf(id string) string {
	s := strings.TrimPrefix(id, "sb-")
	if len(s) > 12 {
		s = s[len(s)-12:]
	}
	return "al-" + s
}

func tableName(id string) string { return "airlock_" + strings.ReplaceAll(id, "-", "_") }

func (m *Manager) dir(id string) string    { return filepath.Join(m.cfg.Dir, id) }
func (m *Manager) nsPath(id string) string { return filepath.Join(m.dir(id), "netns") }

// Attach creates the sandbox's namespace, link, rules and services.
func (m *Manager) Attach(ctx context.Context, req sandbox.NetworkRequest) (_ *sandbox.NetworkAttachment, err error) {
	if m.cfg.Disabled {
		return nil, fmt.Errorf("%w: this daemon has sandbox networking disabled (--no-network); only network mode none is available", errdefs.ErrInvalidArgument)
	}
	st := state{ID: req.ID, Placeholders: map[string]string{}}
	for _, name := range req.Secrets {
		if _, _, err := m.secrets.Value(name); err != nil {
			if errors.Is(err, errdefs.ErrNotFound) {
				return nil, fmt.Errorf("%w: secret %q is not registered", errdefs.ErrInvalidArgument, name)
			}
			return nil, err
		}
		st.Placeholders[name] = placeholder()
	}
	if len(req.Secrets) > 0 {
		ca, err := egress.NewCA(req.ID)
		if err != nil {
			return nil, err
		}
		st.CACert, st.CAKey = ca.CertPEM(), ca.KeyPEM()
	}
	defer func() {
		if err != nil {
			m.Detach(context.WithoutCancel(ctx), req.ID)
		}
	}()
	if err := os.MkdirAll(m.dir(req.ID), 0o700); err != nil {
		return nil, err
	}
	if err := m.plumb(&st); err != nil {
		return nil, err
	}
	if err := netns.EnableForwarding(); err != nil {
		return nil, err
	}
	if err := m.serve(ctx, st, req.Policy); err != nil {
		return nil, err
	}
	return m.files(st, req.TemplatePath)
}

// plumb allocates addresses and creates the namespace and veth pair. The
// state file is written first, so a crash leaves something to sweep.
func (m *Manager) plumb(st *state) error {
	unlock, err := netns.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	link, err := netns.Allocate(m.cfg.Pool)
	if err != nil {
		return err
	}
	link.HostIf = hostIf(st.ID)
	st.Link = link
	if err := st.save(m.dir(st.ID)); err != nil {
		return err
	}
	if err := netns.CreateNS(m.nsPath(st.ID)); err != nil {
		return err
	}
	return netns.CreateLink(m.nsPath(st.ID), link)
}

// Readopt resumes a running sandbox's DNS, proxy and rules.
func (m *Manager) Readopt(ctx context.Context, id string, p netpolicy.Policy) error {
	st, err := loadState(m.dir(id))
	if err != nil {
		return err
	}
	if _, err := os.Stat(m.nsPath(id)); err != nil {
		return fmt.Errorf("sandbox %s network namespace: %w", id, err)
	}
	if !netns.LinkExists(st.Link.HostIf) {
		return fmt.Errorf("sandbox %s interface %s is gone", id, st.Link.HostIf)
	}
	if err := netns.EnableForwarding(); err != nil {
		return err
	}
	return m.serve(ctx, st, p)
}

// SetPolicy switches an attached sandbox's rules and services to p.
func (m *Manager) SetPolicy(ctx context.Context, id string, p netpolicy.Policy) error {
	m.mu.Lock()
	a, ok := m.active[id]
	m.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: sandbox %s has no network interface", errdefs.ErrConflict, id)
	}
	// Rules first: a narrower policy is enforced on the wire before the
	// proxy is told, never after.
	if err := netns.Apply(ctx, m.rules(a, p)); err != nil {
		return err
	}
	a.sb.SetPolicy(p)
	a.proxy.PolicyChanged()
	return nil
}

// Detach stops the sandbox's services and removes its rules, link,
// namespace and state.
func (m *Manager) Detach(ctx context.Context, id string) error {
	m.mu.Lock()
	a, ok := m.active[id]
	delete(m.active, id)
	m.mu.Unlock()
	if ok {
		a.proxy.Close()
		a.dns.Close()
	} else if _, err := os.Stat(m.dir(id)); errors.Is(err, os.ErrNotExist) {
		// The state directory goes last, so without it there is nothing
		// else: a sandbox without a network.
		return nil
	}
	var errs []error
	if err := netns.DeleteTable(ctx, tableName(id)); err != nil {
		errs = append(errs, err)
	}
	if err := netns.DeleteLink(hostIf(id)); err != nil {
		errs = append(errs, err)
	}
	if err := netns.DeleteNS(m.nsPath(id)); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		if err := os.RemoveAll(m.dir(id)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Sweep detaches every sandbox with state here that is not in keep.
func (m *Manager) Sweep(ctx context.Context, keep map[string]bool) ([]string, error) {
	entries, err := os.ReadDir(m.cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", m.cfg.Dir, err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if keep[e.Name()] {
			continue
		}
		if err := m.Detach(ctx, e.Name()); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, e.Name())
	}
	slices.Sort(removed)
	return removed, errors.Join(errs...)
}

// Close stops every sandbox's services. Rules, links and namespaces stay
// for the next daemon to resume.
func (m *Manager) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, a := range m.active {
		a.proxy.Close()
		a.dns.Close()
		delete(m.active, id)
	}
}
