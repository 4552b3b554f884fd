package cli

import (
	"net/netip"

	"github.com/spf13/cobra"

	"github.com/airlockdev/airlock/internal/daemon"
)

// addNetworkFlags registers the daemon's sandbox networking flags.
func addNetworkFlags(cmd *cobra.Command, nc *daemon.NetworkConfig, pool *string) {
	fs := cmd.Flags()
	fs.BoolVar(&nc.Disabled, "no-network", false, "disable sandbox networking: every sandbox gets network mode none")
	fs.StringVar(pool, "network-pool", "10.89.0.0/16", "IPv4 prefix sandbox addresses come from, one /30 per sandbox")
	fs.StringArrayVar(&nc.DNSServers, "dns", nil, "upstream DNS server for sandboxes and the egress proxy, repeatable (default: from /etc/resolv.conf)")
	fs.StringVar(&nc.EgressCAFile, "egress-ca", "", "PEM file of extra root CAs the egress proxy trusts for upstream TLS")
}

func parsePool(s string, nc *daemon.NetworkConfig) error {
	p, err := netip.ParsePrefix(s)
	if err != nil || !p.Addr().Is4() {
		return usagef("--network-pool %q must be an IPv4 prefix such as 10.89.0.0/16", s)
	}
	nc.Pool = p
	return nil
}
