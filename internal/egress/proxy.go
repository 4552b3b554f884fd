package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/airlockdev/airlock/internal/netpolicy"
)

// Secret is a secret a sandbox may use: the placeholder it sees, the real
// value, and the hosts the value may go to.
type Secret struct {
	Placeholder string
	Value       string
	Hosts       []string
}

// Sandbox is what the egress services know about one sandbox.
type Sandbox struct {
	ID     string
	Client netip.Addr // the sandbox's address, the only peer served
	// CA signs the certificates the proxy presents when it terminates TLS
	// for a secret's host; nil when the sandbox has no secrets.
	CA *CA
	// Secrets returns the sandbox's secrets with their current values.
	Secrets func(ctx context.Context) ([]Secret, error)

	policy atomic.Pointer[netpolicy.Policy]
}

// Config is shared by every sandbox's proxy.
type Config struct {
	Resolver *Resolver
	Env      func() netpolicy.Env // pool and host addresses, for address checks
	RootCAs  *x509.CertPool       // verifies upstream TLS; nil: the system's roots
	Log      *slog.Logger
}

// maxConns bounds one sandbox's concurrent proxied connections.
const maxConns = 256

// Proxy is one sandbox's transparent egress proxy. The sandbox's TCP
// connections to ports 80 and 443 are redirected to it by the firewall.
type Proxy struct {
	cfg       Config
	sb        *Sandbox
	ln        net.Listener
	transport *http.Transport
	sem       chan struct{}

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// ServeProxy serves ln until Close.
func ServeProxy(ln net.Listener, sb *Sandbox, cfg Config) *Proxy {
	p := &Proxy{cfg: cfg, sb: sb, ln: ln, sem: make(chan struct{}, maxConns), conns: map[net.Conn]struct{}{}}
	p.transport = &http.Transport{
		DialContext:           p.dial,
		TLSClientConfig:       &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
		DisableCompression:    true, // bodies pass through as the server sent them
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 2 * time.Minute,
	}
	p.wg.Add(1)
	go p.serve()
	return p
}

// Close stops accepting and cuts every open connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.transport.CloseIdleConnections()
	p.wg.Wait()
}

// PolicyChanged drops pooled upstream connections so the new policy
// applies to the next request.
func (p *Proxy) PolicyChanged() { p.transport.CloseIdleConnections() }

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if !p.sb.isClient(c.RemoteAddr()) {
			c.Close()
			continue
		}
		select {
		case p.sem <- struct{}{}:
		default:
			p.cfg.Log.Warn("egress proxy connection limit reached", "sandbox", p.sb.ID)
			c.Close()
			continue
		}
		if !p.track(c, true) {
			<-p.sem
			c.Close()
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer func() { <-p.sem }()
			defer p.track(c, false)
			defer c.Close()
			p.handle(c)
		}()
	}
}

func (p *Proxy) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		if p.closed {
			return false
		}
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
	return true
}

func (p *Proxy) handle(c net.Conn) {
	dst, err := originalDst(c)
	if err != nil {
		p.cfg.Log.Warn("egress proxy: no original destination", "sandbox", p.sb.ID, "err", err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if dst.Port() == 443 {
		p.handleTLS(ctx, c, dst)
		return
	}
	p.serveHTTP(ctx, c, bufio.NewReader(c), dst, "")
}

// blocked logs a refused destination and returns the error to report.
func (p *Proxy) blocked(what string) error {
	p.cfg.Log.Info("egress blocked", "sandbox", p.sb.ID, "dest", what)
	return fmt.Errorf("%w: %s", errBlocked, what)
}

var errBlocked = errors.New("egress not allowed by the sandbox's network policy")

// dial connects to addr for the sandbox. A name must be allowed by the
// policy and is resolved here; the connection goes only to a resolved
// address the policy allows. An address literal must be allowed directly.
func (p *Proxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	pol, env := p.sb.Policy(), p.cfg.Env()
	var cands []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		if !pol.AllowsDirect(ip, env) {
			return nil, p.blocked(addr)
		}
		cands = []netip.Addr{ip}
	} else {
		if !pol.AllowsHost(host) {
			return nil, p.blocked(host)
		}
		addrs, err := p.cfg.Resolver.LookupA(ctx, host)
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			if pol.AllowsResolved(a, env) {
				cands = append(cands, a)
			}
		}
		if len(cands) == 0 {
			return nil, p.blocked(fmt.Sprintf("%s (resolves to %v)", host, addrs))
		}
	}
	d := net.Dialer{Timeout: 10 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		// Last line of defence: whatever path led here, never the host,
		// loopback, metadata or another sandbox.
		ap, err := netip.ParseAddrPort(address)
		if err != nil || env.Forbidden(ap.Addr().Unmap()) {
			return p.blocked(address)
		}
		return nil
	}}
	var errs []error
	for _, a := range cands {
		c, err := d.DialContext(ctx, "tcp4", net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// pipe copies both ways until either side is done.
func pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	// One side is finished; bound how long the other may linger.
	deadline := time.Now().Add(time.Minute)
	a.SetDeadline(deadline)
	b.SetDeadline(deadline)
	<-done
}
