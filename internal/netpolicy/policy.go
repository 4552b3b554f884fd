// Package netpolicy parses and evaluates sandbox egress policies: which
// names and addresses a sandbox may reach, and the ranges it never may.
// It is pure logic, shared by the rule generator, the egress proxy and the
// DNS forwarder so that they cannot disagree.
package netpolicy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// MaxAllow is the most entries an allowlist may have.
const MaxAllow = 256

// Policy is a validated egress policy.
type Policy struct {
	Mode     string
	Prefixes []netip.Prefix // IPv4 only, masked
	Domains  []string       // normalised names and "*.suffix" patterns
}

// None is the policy of a sandbox without a network.
var None = Policy{Mode: api.NetworkNone}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errdefs.ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// Parse validates p; nil or an empty mode is mode none. pool is the sandbox
// address pool, which no allowlist may name.
func Parse(p *api.NetworkPolicy, pool netip.Prefix) (Policy, error) {
	if p == nil || p.Mode == "" {
		if p != nil && len(p.Allow) > 0 {
			return Policy{}, invalid("network.allow needs network.mode %q", api.NetworkAllowlist)
		}
		return None, nil
	}
	switch p.Mode {
	case api.NetworkNone, api.NetworkOpen:
		if len(p.Allow) > 0 {
			return Policy{}, invalid("network.allow is only for mode %q, not %q", api.NetworkAllowlist, p.Mode)
		}
		return Policy{Mode: p.Mode}, nil
	case api.NetworkAllowlist:
	default:
		return Policy{}, invalid("network.mode must be %q, %q or %q, got %q", api.NetworkNone, api.NetworkAllowlist, api.NetworkOpen, p.Mode)
	}
	if len(p.Allow) > MaxAllow {
		return Policy{}, invalid("network.allow has %d entries, at most %d", len(p.Allow), MaxAllow)
	}
	out := Policy{Mode: api.NetworkAllowlist}
	for _, e := range p.Allow {
		e = strings.TrimSpace(e)
		if looksLikeAddress(e) {
			pfx, err := parsePrefix(e, pool)
			if err != nil {
				return Policy{}, err
			}
			if !slices.Contains(out.Prefixes, pfx) {
				out.Prefixes = append(out.Prefixes, pfx)
			}
			continue
		}
		d, err := ParsePattern(e)
		if err != nil {
			return Policy{}, invalid("network.allow entry %q: %v", e, err)
		}
		if !slices.Contains(out.Domains, d) {
			out.Domains = append(out.Domains, d)
		}
	}
	return out, nil
}

// API returns the policy in its wire form, normalised.
func (p Policy) API() api.NetworkPolicy {
	out := api.NetworkPolicy{Mode: p.Mode}
	for _, pfx := range p.Prefixes {
		out.Allow = append(out.Allow, pfx.String())
	}
	out.Allow = append(out.Allow, p.Domains...)
	return out
}

// Networked reports whether the policy lets anything out at all.
func (p Policy) Networked() bool {
	return p.Mode == api.NetworkAllowlist || p.Mode == api.NetworkOpen
}

func looksLikeAddress(s string) bool {
	host, _, _ := strings.Cut(s, "/")
	_, err := netip.ParseAddr(host)
	return err == nil || strings.Contains(s, "/") || strings.Contains(s, ":")
}

func parsePrefix(s string, pool netip.Prefix) (netip.Prefix, error) {
	var pfx netip.Prefix
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return pfx, invalid("network.allow entry %q is not a valid CIDR", s)
		}
		pfx = p
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return pfx, invalid("network.allow entry %q is not a valid address", s)
		}
		pfx = netip.PrefixFrom(a, a.BitLen())
	}
	if !pfx.Addr().Unmap().Is4() {
		return pfx, invalid("network.allow entry %q: IPv6 egress is not supported, sandboxes have IPv4 only", s)
	}
	if pfx.Masked() != pfx {
		return pfx, invalid("network.allow entry %q has host bits set; did you mean %s?", s, pfx.Masked())
	}
	if name, ok := neverContains(pfx); ok {
		return pfx, invalid("network.allow entry %q is within %s, which sandboxes can never reach", s, name)
	}
	if pool.IsValid() && pool.Bits() <= pfx.Bits() && pool.Contains(pfx.Addr()) {
		return pfx, invalid("network.allow entry %q is within the sandbox address pool %s; sandboxes can never reach each other", s, pool)
	}
	return pfx, nil
}

// ParsePattern validates and normalises a domain name or a "*.suffix"
// wildcard: lower case, no trailing dot, at least two labels after the
// wildcard.
func ParsePattern(s string) (string, error) {
	s = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), ".")
	name, wild := strings.CutPrefix(s, "*.")
	if strings.Contains(name, "*") {
		return "", fmt.Errorf("a wildcard is allowed only as the whole first label, as in *.example.com")
	}
	if err := checkName(name); err != nil {
		return "", err
	}
	if !strings.Contains(name, ".") {
		if wild {
			return "", fmt.Errorf("a wildcard needs at least two labels after it, as in *.example.com")
		}
		return "", fmt.Errorf("must be a fully qualified name such as example.com")
	}
	if wild {
		return "*." + name, nil
	}
	return name, nil
}

func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("empty domain name")
	}
	if len(name) > 253 {
		return fmt.Errorf("domain name longer than 253 characters")
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("domain labels must be 1 to 63 characters")
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("domain label %q starts or ends with '-'", label)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("domain label %q has character %q; only letters, digits, '-' and '_' are allowed", label, c)
			}
		}
	}
	return nil
}

// NormalizeHost lower-cases a host name, drops a trailing dot and any
// port, and reports whether what remains is a valid name (not an address).
func NormalizeHost(host string) (string, bool) {
	if h, _, ok := strings.Cut(host, ":"); ok && !strings.Contains(host, "]") {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if _, err := netip.ParseAddr(host); err == nil || checkName(host) != nil {
		return host, false
	}
	return host, true
}

// MatchPattern reports whether a normalised host matches a pattern:
// "example.com" matches only itself, "*.example.com" every name below
// example.com but not example.com.
func MatchPattern(pattern, host string) bool {
	if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
		return strings.HasSuffix(host, "."+suffix)
	}
	return pattern == host
}

// MatchAny reports whether host matches any of patterns.
func MatchAny(patterns []string, host string) bool {
	for _, p := range patterns {
		if MatchPattern(p, host) {
			return true
		}
	}
	return false
}

// AllowsHost reports whether connections to a name are allowed (before
// checking where it resolves).
func (p Policy) AllowsHost(host string) bool {
	host, ok := NormalizeHost(host)
	if !ok {
		return false
	}
	switch p.Mode {
	case api.NetworkOpen:
		return true
	case api.NetworkAllowlist:
		return MatchAny(p.Domains, host)
	}
	return false
}
