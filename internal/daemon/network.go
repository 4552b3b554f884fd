package daemon

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/airlockdev/airlock/internal/network"
)

// NetworkConfig configures sandbox networking.
type NetworkConfig struct {
	Disabled   bool         // only network mode none
	Pool       netip.Prefix // sandbox addresses (default 10.89.0.0/16)
	DNSServers []string     // upstream DNS (default: /etc/resolv.conf)
	// EgressCAFile is a PEM file of extra roots the egress proxy trusts
	// for upstream TLS (for private or test servers).
	EgressCAFile string
}

// openNetwork sets up sandbox networking. Disabled, it still resumes and
// cleans up the networks of sandboxes an earlier run created. A host that
// cannot do it (no nftables) still serves sandboxes in mode none.
func (d *Daemon) openNetwork(cfg Config, secrets network.Secrets) error {
	nc := cfg.Network
	// Secrets and sandbox CA keys are stored here in clear.
	if fi, err := os.Stat(cfg.DataDir); err == nil && fi.Mode().Perm()&0o077 != 0 {
		cfg.Log.Warn("data directory is readable by other users; it holds secrets, make it 0700", "dir", cfg.DataDir, "mode", fi.Mode().Perm().String())
	}
	var extra []byte
	if nc.EgressCAFile != "" {
		b, err := os.ReadFile(nc.EgressCAFile)
		if err != nil {
			return fmt.Errorf("egress CA file: %w", err)
		}
		extra = b
	}
	nm, err := network.New(network.Config{
		Dir: filepath.Join(cfg.DataDir, "network"), Pool: nc.Pool, DNSServers: nc.DNSServers,
		ExtraRootCAs: extra, Disabled: nc.Disabled, Log: cfg.Log,
	}, secrets)
	if err != nil {
		cfg.Log.Warn("sandbox networking unavailable; only network mode none", "err", err)
		return nil
	}
	d.network = nm
	d.manager.UseNetwork(nm)
	return nil
}
