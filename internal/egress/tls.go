package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/airlockdev/airlock/internal/netpolicy"
)

// handleTLS routes a connection to port 443 by the SNI of its ClientHello.
// An allowed name goes to the proxy's own resolution of that name, so a
// sandbox that lies in its SNI only ever reaches the name it claimed.
// Names with secrets are terminated with the sandbox's CA; all others pass
// through untouched.
func (p *Proxy) handleTLS(ctx context.Context, c net.Conn, dst netip.AddrPort) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	hello, raw, _ := readClientHello(c)
	c.SetReadDeadline(time.Time{})
	in := &prefixConn{Conn: c, prefix: raw}
	port := strconv.Itoa(int(dst.Port()))

	host, named := "", false
	if hello != nil {
		host, named = netpolicy.NormalizeHost(hello.ServerName)
	}
	var target string
	switch {
	case named && p.sb.Policy().AllowsHost(host):
		if secrets := p.secretsFor(ctx, host); len(secrets) > 0 && p.sb.CA != nil {
			p.intercept(ctx, in, host, dst)
			return
		}
		target = net.JoinHostPort(host, port)
	case p.sb.Policy().AllowsDirect(dst.Addr(), p.cfg.Env()):
		// No usable name (or one not on the list): the destination
		// address itself must be allowed.
		target = dst.String()
	default:
		name := host
		if name == "" {
			name = "(no SNI)"
		}
		p.blocked(name + " via " + dst.String())
		return
	}
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	up, err := p.dial(dctx, "tcp", target)
	cancel()
	if err != nil {
		return
	}
	defer up.Close()
	pipe(in, up)
}

// intercept terminates the sandbox's TLS with a certificate for host from
// the sandbox's CA and serves its HTTP requests, which go to host over a
// new, verified TLS connection.
func (p *Proxy) intercept(ctx context.Context, c net.Conn, host string, dst netip.AddrPort) {
	cert, err := p.sb.CA.leaf(host)
	if err != nil {
		p.cfg.Log.Error("egress proxy: issue certificate", "sandbox", p.sb.ID, "host", host, "err", err)
		return
	}
	tc := tls.Server(c, &tls.Config{
		Certificates: []tls.Certificate{*cert},
		NextProtos:   []string{"http/1.1"},
		MinVersion:   tls.VersionTLS12,
	})
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		return
	}
	p.serveHTTP(ctx, tc, bufio.NewReader(tc), dst, host)
}

var errSniffed = errors.New("client hello read")

// readClientHello reads the ClientHello with crypto/tls's own parser and
// returns it with every byte read, for replay to the real destination.
func readClientHello(c net.Conn) (*tls.ClientHelloInfo, []byte, error) {
	var buf bytes.Buffer
	var hello *tls.ClientHelloInfo
	err := tls.Server(readOnlyConn{Conn: c, r: io.TeeReader(c, &buf)}, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			cp := *h
			hello = &cp
			return nil, errSniffed
		},
	}).Handshake()
	if hello == nil {
		return nil, buf.Bytes(), err
	}
	return hello, buf.Bytes(), nil
}

// readOnlyConn lets the TLS parser read but never write.
type readOnlyConn struct {
	net.Conn
	r io.Reader
}

func (c readOnlyConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c readOnlyConn) Write(p []byte) (int, error) { return 0, io.ErrClosedPipe }
func (c readOnlyConn) Close() error                { return nil }

// prefixConn replays bytes already read before reading the connection.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}
