// Package egress is the data plane of sandbox network policy: a DNS
// forwarder that answers only allowed names, and a transparent proxy that
// checks the TLS SNI or HTTP Host of every connection, resolves the name
// itself, refuses forbidden addresses, and swaps secret placeholders for
// real values on the way to the secret's hosts.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Resolver sends DNS queries to the operator's upstream servers. The proxy
// resolves names with it, never with what the sandbox claims.
type Resolver struct {
	servers []string // host:port
	timeout time.Duration
}

// NewResolver returns a resolver for servers ("1.2.3.4" or "1.2.3.4:53");
// with none, the servers of the host's /etc/resolv.conf.
func NewResolver(servers []string) (*Resolver, error) {
	if len(servers) == 0 {
		cc, err := dns.ClientConfigFromFile("/etc/resolv.conf")
		if err != nil {
			return nil, fmt.Errorf("read upstream DNS servers: %w", err)
		}
		for _, s := range cc.Servers {
			servers = append(servers, net.JoinHostPort(s, cc.Port))
		}
	}
	var out []string
	for _, s := range servers {
		if _, _, err := net.SplitHostPort(s); err != nil {
			s = net.JoinHostPort(s, "53")
		}
		host, _, _ := net.SplitHostPort(s)
		if _, err := netip.ParseAddr(host); err != nil {
			return nil, fmt.Errorf("upstream DNS server %q is not an IP address", s)
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, errors.New("no upstream DNS server configured")
	}
	return &Resolver{servers: out, timeout: 3 * time.Second}, nil
}

// Exchange forwards a query to the first upstream that answers, over TCP
// when the UDP answer is truncated.
func (r *Resolver) Exchange(ctx context.Context, q *dns.Msg) (*dns.Msg, error) {
	var errs []error
	for _, s := range r.servers {
		for _, network := range []string{"udp", "tcp"} {
			c := &dns.Client{Net: network, Timeout: r.timeout}
			resp, _, err := c.ExchangeContext(ctx, q, s)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s/%s: %w", s, network, err))
				break
			}
			if resp.Truncated && network == "udp" {
				continue
			}
			return resp, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("dns upstream: %w", errors.Join(errs...))
}

// LookupA returns the IPv4 addresses of name (sandboxes have no IPv6).
func (r *Resolver) LookupA(ctx context.Context, name string) ([]netip.Addr, error) {
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), dns.TypeA)
	resp, err := r.Exchange(ctx, q)
	if err != nil {
		return nil, err
	}
	if resp.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("resolve %s: %s", name, dns.RcodeToString[resp.Rcode])
	}
	var out []netip.Addr
	for _, rr := range resp.Answer {
		if a, ok := rr.(*dns.A); ok {
			if ip, ok := netip.AddrFromSlice(a.A.To4()); ok {
				out = append(out, ip)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("resolve %s: no IPv4 address", strings.TrimSuffix(name, "."))
	}
	return out, nil
}
