package netpolicy

import (
	"net/netip"
	"slices"

	"github.com/airlockdev/airlock/api"
)

type namedPrefix struct {
	prefix netip.Prefix
	name   string
}

func mustPrefixes(ps ...[2]string) []namedPrefix {
	out := make([]namedPrefix, len(ps))
	for i, p := range ps {
		out[i] = namedPrefix{netip.MustParsePrefix(p[0]), p[1]}
	}
	return out
}

// never lists what no sandbox reaches, whatever its policy says: the host
// itself, cloud metadata, multicast and reserved space.
var never = mustPrefixes(
	[2]string{"0.0.0.0/8", "0.0.0.0/8 (this network)"},
	[2]string{"127.0.0.0/8", "127.0.0.0/8 (loopback)"},
	[2]string{"169.254.0.0/16", "169.254.0.0/16 (link-local, cloud metadata)"},
	[2]string{"224.0.0.0/4", "224.0.0.0/4 (multicast)"},
	[2]string{"240.0.0.0/4", "240.0.0.0/4 (reserved, broadcast)"},
	[2]string{"::/128", "::/128 (unspecified)"},
	[2]string{"::1/128", "::1 (loopback)"},
	[2]string{"fe80::/10", "fe80::/10 (link-local)"},
	[2]string{"ff00::/8", "ff00::/8 (multicast)"},
)

// private lists ranges a sandbox reaches only through an explicit
// allowlisted CIDR: private networks, CGNAT, unique local IPv6, and IPv6
// translation prefixes that could lead back into them.
var private = mustPrefixes(
	[2]string{"10.0.0.0/8", "10.0.0.0/8 (private)"},
	[2]string{"172.16.0.0/12", "172.16.0.0/12 (private)"},
	[2]string{"192.168.0.0/16", "192.168.0.0/16 (private)"},
	[2]string{"100.64.0.0/10", "100.64.0.0/10 (CGNAT)"},
	[2]string{"fc00::/7", "fc00::/7 (unique local)"},
	[2]string{"64:ff9b::/96", "64:ff9b::/96 (NAT64)"},
	[2]string{"2002::/16", "2002::/16 (6to4)"},
)

// NeverPrefixes returns the IPv4 ranges no sandbox may ever reach.
func NeverPrefixes() []netip.Prefix { return v4(never) }

// PrivatePrefixes returns the IPv4 ranges reachable only when allowlisted.
func PrivatePrefixes() []netip.Prefix { return v4(private) }

func v4(ps []namedPrefix) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ps {
		if p.prefix.Addr().Is4() {
			out = append(out, p.prefix)
		}
	}
	return out
}

func neverContains(pfx netip.Prefix) (string, bool) {
	for _, n := range never {
		if n.prefix.Bits() <= pfx.Bits() && n.prefix.Contains(pfx.Addr()) {
			return n.name, true
		}
	}
	return "", false
}

func in(ps []namedPrefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.prefix.Contains(a) {
			return true
		}
	}
	return false
}

// Env is what address checks need to know about the host.
type Env struct {
	Pool netip.Prefix // the sandbox address pool
	Host []netip.Addr // every address of the host, on every interface
}

// Forbidden reports whether a is off limits to every sandbox.
func (e Env) Forbidden(a netip.Addr) bool {
	return !a.IsValid() || in(never, a) || e.Pool.Contains(a) || slices.Contains(e.Host, a)
}

// AllowsDirect reports whether the sandbox may connect to address a when
// no name is involved (a connection the proxy cannot attribute to a name).
func (p Policy) AllowsDirect(a netip.Addr, env Env) bool {
	a = a.Unmap()
	if !a.Is4() || env.Forbidden(a) {
		return false
	}
	switch p.Mode {
	case api.NetworkOpen:
		return !in(private, a)
	case api.NetworkAllowlist:
		return p.inPrefixes(a)
	}
	return false
}

// AllowsResolved reports whether the proxy may connect to a, which it
// resolved itself from a name the policy allows. An explicitly allowlisted
// CIDR lifts the private ranges, never the forbidden ones.
func (p Policy) AllowsResolved(a netip.Addr, env Env) bool {
	a = a.Unmap()
	if !a.Is4() || env.Forbidden(a) || !p.Networked() {
		return false
	}
	return !in(private, a) || p.inPrefixes(a)
}

func (p Policy) inPrefixes(a netip.Addr) bool {
	for _, pfx := range p.Prefixes {
		if pfx.Contains(a) {
			return true
		}
	}
	return false
}
