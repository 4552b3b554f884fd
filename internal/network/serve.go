package network

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/egress"
	"github.com/airlockdev/airlock/internal/errdefs"
	"github.com/airlockdev/airlock/internal/netns"
	"github.com/airlockdev/airlock/internal/netpolicy"
)

// redirectPorts are the TCP ports whose connections go through the
// egress proxy, which needs a TLS SNI or HTTP Host to judge them by name.
var redirectPorts = []uint16{80, 443}

// serve starts the sandbox's DNS forwarder and proxy on the host end of its
// link and installs its rules pointing at them. Listeners take fresh ports
// each time, so a restarted daemon re-installs the rules.
func (m *Manager) serve(ctx context.Context, st state, p netpolicy.Policy) error {
	gw := st.Link.Host.Addr()
	proxyLn, err := net.Listen("tcp4", netip.AddrPortFrom(gw, 0).String())
	if err != nil {
		return fmt.Errorf("egress proxy listen: %w", err)
	}
	dnsLn, dnsPC, err := listenDNS(gw)
	if err != nil {
		proxyLn.Close()
		return err
	}
	sb := &egress.Sandbox{ID: st.ID, Client: st.Link.Sandbox.Addr(), Secrets: m.secretsFunc(st)}
	if len(st.CACert) > 0 {
		if sb.CA, err = egress.LoadCA(st.CACert, st.CAKey); err != nil {
			proxyLn.Close()
			dnsLn.Close()
			dnsPC.Close()
			return err
		}
	}
	sb.SetPolicy(p)
	a := &attached{
		st:    st,
		sb:    sb,
		proxy: egress.ServeProxy(proxyLn, sb, m.egress),
		dns:   egress.ServeDNS(dnsPC, dnsLn, sb, m.egress.Resolver, m.cfg.Log),
	}
	a.proxyPort = uint16(proxyLn.Addr().(*net.TCPAddr).Port)
	a.dnsPort = uint16(dnsLn.Addr().(*net.TCPAddr).Port)
	m.mu.Lock()
	old := m.active[st.ID]
	m.active[st.ID] = a
	m.mu.Unlock()
	if old != nil {
		old.proxy.Close()
		old.dns.Close()
	}
	if err := netns.Apply(ctx, m.rules(a, p)); err != nil {
		return err // Detach, which follows, stops the services
	}
	return nil
}

// listenDNS opens TCP and UDP sockets on one free port of addr.
func listenDNS(addr netip.Addr) (net.Listener, net.PacketConn, error) {
	var errs []error
	for range 8 {
		ln, err := net.Listen("tcp4", netip.AddrPortFrom(addr, 0).String())
		if err != nil {
			return nil, nil, fmt.Errorf("dns forwarder listen: %w", err)
		}
		pc, err := net.ListenPacket("udp4", ln.Addr().String())
		if err == nil {
			return ln, pc, nil
		}
		ln.Close()
		errs = append(errs, err)
	}
	return nil, nil, fmt.Errorf("dns forwarder listen: %w", errors.Join(errs...))
}

func (m *Manager) rules(a *attached, p netpolicy.Policy) netns.Rules {
	r := netns.Rules{
		Table:     tableName(a.st.ID),
		Link:      a.st.Link,
		Never:     netpolicy.NeverPrefixes(),
		Private:   netpolicy.PrivatePrefixes(),
		Pool:      m.cfg.Pool,
		ProxyPort: a.proxyPort,
		DNSPort:   a.dnsPort,
		Redirect:  redirectPorts,
	}
	switch p.Mode {
	case api.NetworkAllowlist:
		r.Mode, r.Allowed = netns.RulesAllowlist, p.Prefixes
	case api.NetworkOpen:
		r.Mode = netns.RulesOpen
	default:
		r.Mode = netns.RulesBlocked
	}
	return r
}

// secretsFunc gives the proxy the sandbox's secrets with current values: a
// secret deleted or re-scoped by the operator takes effect at once.
func (m *Manager) secretsFunc(st state) func(context.Context) ([]egress.Secret, error) {
	return func(ctx context.Context) ([]egress.Secret, error) {
		var out []egress.Secret
		for name, ph := range st.Placeholders {
			v, hosts, err := m.secrets.Value(name)
			if errors.Is(err, errdefs.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, egress.Secret{Placeholder: ph, Value: v, Hosts: hosts})
		}
		return out, nil
	}
}
