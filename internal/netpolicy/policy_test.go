package netpolicy

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/errdefs"
)

var testPool = netip.MustParsePrefix("10.89.0.0/16")

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      *api.NetworkPolicy
		want    []string // normalised allow list
		wantErr string
	}{
		{name: "nil is none", in: nil},
		{name: "empty mode is none", in: &api.NetworkPolicy{}},
		{name: "open", in: &api.NetworkPolicy{Mode: "open"}},
		{name: "allowlist", in: &api.NetworkPolicy{Mode: "allowlist", Allow: []string{"Example.COM.", "*.wild.test", "198.51.100.0/24", "203.0.113.7", "example.com"}},
			want: []string{"198.51.100.0/24", "203.0.113.7/32", "example.com", "*.wild.test"}},
		{name: "private CIDR may be allowlisted", in: &api.NetworkPolicy{Mode: "allowlist", Allow: []string{"10.1.2.0/24"}}, want: []string{"10.1.2.0/24"}},
		{name: "bad mode", in: &api.NetworkPolicy{Mode: "bridge"}, wantErr: `network.mode must be`},
		{name: "allow without allowlist", in: &api.NetworkPolicy{Mode: "open", Allow: []string{"a.com"}}, wantErr: "only for mode"},
		{name: "allow without mode", in: &api.NetworkPolicy{Allow: []string{"a.com"}}, wantErr: "needs network.mode"},
		{name: "bad CIDR", in: &api.NetworkPolicy{Mode: "allowlist", Allow: []string{"10.1.2.0/33"}}, wantErr: "not a valid CIDR"},
		{name: "host bits", in: &api.NetworkPolicy{Mode: "allowlist", Allow: []string{"10.1.2.3/24"}}, wantErr: "did you mean 10.1.2.0/24"},
		{name: "ipv6", in: &api.NetworkPolicy{Mode: "allowlist", Allow: []string{"2001:db8::/32"}}, wantErr: "IPv6 egress is not supported"},
		{name: "loopback", in: &api.NetworkPolicy{Mode: "allowlist", Allow: []string{"127.0.0.1"}}, wantErr: "loopback"},
		{name: "metadata", in: &api.NetworkPolicy{Mode: "allowlist", Allow: []string{"169.254.169.254/32"}}, wantErr: "cloud metadata"},
		{name: "pool", in: &api.NetworkPolicy{Mode: "allowlist", Allow: []string{"10.89.3.0/24"}}, wantErr: "sandbox address pool"},
		{name: "single label", in: &api.NetworkPolicy{Mode: "allowlist", Allow: []string{"localhost"}}, wantErr: "fully qualified"},
		{name: "bare wildcard", in: &api.NetworkPolicy{Mode: "allowlist", Allow: []string{"*"}}, wantErr: "whole first label"},
		{name: "tld wildcard", in: &api.NetworkPolicy{Mode: "allowlist", Allow: []string{"*.com"}}, wantErr: "two labels"},
		{name: "inner wildcard", in: &api.NetworkPolicy{Mode: "allowlist", Allow: []string{"a.*.com"}}, wantErr: "whole first label"},
		{name: "bad char", in: &api.NetworkPolicy{Mode: "allowlist", Allow: []string{"ex ample.com"}}, wantErr: "has character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.in, testPool)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, errdefs.ErrInvalidArgument) {
					t.Fatalf("err = %v, want invalid argument containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := p.API().Allow
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("allow = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMatchPattern(t *testing.T) {
	for _, tc := range []struct {
		pattern, host string
		want          bool
	}{
		{"example.com", "example.com", true},
		{"example.com", "a.example.com", false},
		{"*.example.com", "a.example.com", true},
		{"*.example.com", "a.b.example.com", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "badexample.com", false},
	} {
		if got := MatchPattern(tc.pattern, tc.host); got != tc.want {
			t.Errorf("MatchPattern(%q, %q) = %v", tc.pattern, tc.host, got)
		}
	}
	p, _ := Parse(&api.NetworkPolicy{Mode: "allowlist", Allow: []string{"*.wild.test", "allowed.test"}}, testPool)
	for host, want := range map[string]bool{"ALLOWED.test.": true, "allowed.test:443": true, "x.wild.test": true, "denied.test": false, "198.51.100.1": false} {
		if got := p.AllowsHost(host); got != want {
			t.Errorf("AllowsHost(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestAddressChecks(t *testing.T) {
	env := Env{Pool: testPool, Host: []netip.Addr{netip.MustParseAddr("192.0.2.2")}}
	open := Policy{Mode: api.NetworkOpen}
	allow, _ := Parse(&api.NetworkPolicy{Mode: "allowlist", Allow: []string{"10.1.2.0/24", "198.51.100.0/24", "a.test"}}, testPool)
	for _, tc := range []struct {
		addr                  string
		openDirect, allDirect bool
		allResolved           bool
	}{
		{"198.51.100.10", true, true, true},
		{"203.0.113.5", true, false, true},
		{"10.1.2.3", false, true, true},
		{"10.9.9.9", false, false, false},
		{"10.89.0.6", false, false, false}, // another sandbox
		{"192.0.2.2", false, false, false}, // the host
		{"127.0.0.1", false, false, false},
		{"169.254.169.254", false, false, false},
		{"100.64.0.1", false, false, false},
		{"172.16.0.1", false, false, false},
		{"192.168.1.1", false, false, false},
		{"224.0.0.1", false, false, false},
		{"::ffff:127.0.0.1", false, false, false},
		{"2001:db8::1", false, false, false},
	} {
		a := netip.MustParseAddr(tc.addr)
		if got := open.AllowsDirect(a, env); got != tc.openDirect {
			t.Errorf("open.AllowsDirect(%s) = %v", a, got)
		}
		if got := open.AllowsResolved(a, env); got != tc.openDirect {
			t.Errorf("open.AllowsResolved(%s) = %v", a, got)
		}
		if got := allow.AllowsDirect(a, env); got != tc.allDirect {
			t.Errorf("allowlist.AllowsDirect(%s) = %v", a, got)
		}
		if got := allow.AllowsResolved(a, env); got != tc.allResolved {
			t.Errorf("allowlist.AllowsResolved(%s) = %v", a, got)
		}
		if None.AllowsDirect(a, env) || None.AllowsResolved(a, env) {
			t.Errorf("none allows %s", a)
		}
	}
}
