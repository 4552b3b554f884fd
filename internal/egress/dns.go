package egress

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/miekg/dns"

	"github.com/airlockdev/airlock/internal/netpolicy"
)

// DNS is one sandbox's DNS forwarder. Every DNS packet the sandbox sends
// is redirected to it; it answers names its policy allows from upstream and
// NXDOMAIN for everything else, so a blocked name does not even resolve.
type DNS struct {
	sb       *Sandbox
	resolver *Resolver
	log      *slog.Logger
	udp, tcp *dns.Server
	pc       net.PacketConn
	ln       net.Listener
}

// ServeDNS starts a forwarder on pc (UDP) and ln (TCP). Close stops it.
func ServeDNS(pc net.PacketConn, ln net.Listener, sb *Sandbox, r *Resolver, log *slog.Logger) *DNS {
	d := &DNS{sb: sb, resolver: r, log: log, pc: pc, ln: ln}
	d.udp = &dns.Server{PacketConn: pc, Handler: d, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second}
	d.tcp = &dns.Server{Listener: ln, Handler: d, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second}
	go d.udp.ActivateAndServe()
	go d.tcp.ActivateAndServe()
	return d
}

// Close stops the forwarder and closes its sockets.
func (d *DNS) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	d.udp.ShutdownContext(ctx)
	d.tcp.ShutdownContext(ctx)
	// A server not yet started ignores Shutdown; closing its sockets makes
	// it return as soon as it starts.
	d.pc.Close()
	d.ln.Close()
}

func (d *DNS) ServeDNS(w dns.ResponseWriter, q *dns.Msg) {
	if !d.sb.isClient(w.RemoteAddr()) {
		return // only the sandbox itself is served
	}
	reply := func(rcode int) {
		m := new(dns.Msg)
		m.SetRcode(q, rcode)
		m.RecursionAvailable = true
		w.WriteMsg(m)
	}
	if len(q.Question) != 1 || q.Opcode != dns.OpcodeQuery {
		reply(dns.RcodeFormatError)
		return
	}
	name := q.Question[0].Name
	if !d.sb.Policy().AllowsHost(name) {
		d.log.Info("egress dns blocked", "sandbox", d.sb.ID, "name", name)
		reply(dns.RcodeNameError)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := d.resolver.Exchange(ctx, q)
	if err != nil {
		d.log.Warn("egress dns upstream failed", "sandbox", d.sb.ID, "name", name, "err", err)
		reply(dns.RcodeServerFailure)
		return
	}
	resp.Id = q.Id
	w.WriteMsg(resp)
}

// isClient reports whether addr is the sandbox's own address.
func (sb *Sandbox) isClient(addr net.Addr) bool {
	var ip netip.Addr
	switch a := addr.(type) {
	case *net.UDPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	case *net.TCPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	}
	return ip.Unmap() == sb.Client
}

// Policy returns the sandbox's current policy.
func (sb *Sandbox) Policy() netpolicy.Policy {
	if p := sb.policy.Load(); p != nil {
		return *p
	}
	return netpolicy.None
}

// SetPolicy replaces the sandbox's policy for new connections and queries.
func (sb *Sandbox) SetPolicy(p netpolicy.Policy) { sb.policy.Store(&p) }
