package egress

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"time"

	"github.com/airlockdev/airlock/internal/netpolicy"
)

// maxBufferedBody is the largest request body rewritten in memory (with an
// exact Content-Length); larger ones are rewritten as a chunked stream.
const maxBufferedBody = 1 << 20

// serveHTTP proxies the HTTP/1.x requests of one connection. Each request
// is checked by its Host: an allowed name goes to the proxy's resolution
// of it; otherwise the original destination address must be allowed.
// tlsHost is the SNI of an intercepted TLS connection, which every
// request's Host must match.
func (p *Proxy) serveHTTP(ctx context.Context, c net.Conn, br *bufio.Reader, dst netip.AddrPort, tlsHost string) {
	scheme := "http"
	if tlsHost != "" {
		scheme = "https"
	}
	port := strconv.Itoa(int(dst.Port()))
	for {
		c.SetReadDeadline(time.Now().Add(2 * time.Minute))
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		c.SetReadDeadline(time.Time{})
		pol := p.sb.Policy()
		host, named := netpolicy.NormalizeHost(req.Host)
		var target string
		switch {
		case tlsHost != "":
			if host != tlsHost {
				writeError(c, http.StatusMisdirectedRequest, fmt.Sprintf("Host %q does not match the TLS server name %q", req.Host, tlsHost))
				return
			}
			target = host
		case named && pol.AllowsHost(host):
			target = host
		case pol.AllowsDirect(dst.Addr(), p.cfg.Env()):
			target, named = dst.Addr().String(), false
		default:
			name := req.Host
			if name == "" {
				name = "(no Host)"
			}
			p.blocked(name + " via " + dst.String())
			writeError(c, http.StatusForbidden, fmt.Sprintf("airlock: egress to %s is not allowed by this sandbox's network policy", name))
			return
		}
		var fwd, back [][2]string
		if named {
			for _, s := range p.secretsFor(ctx, host) {
				fwd = append(fwd, [2]string{s.Placeholder, s.Value})
				back = append(back, [2]string{s.Value, s.Placeholder})
			}
		}
		if err := prepare(req, scheme, net.JoinHostPort(target, port), fwd); err != nil {
			writeError(c, http.StatusBadRequest, "airlock: "+err.Error())
			return
		}
		resp, err := p.transport.RoundTrip(req.WithContext(ctx))
		if err != nil {
			status := http.StatusBadGateway
			if errors.Is(err, errBlocked) {
				status = http.StatusForbidden
			}
			// The error may quote the rewritten URL, real value included.
			writeError(c, status, "airlock: "+replaceString(err.Error(), back))
			return
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			p.upgrade(c, br, resp)
			return
		}
		if len(back) > 0 {
			// Keep the real value out of the sandbox even when the server
			// echoes it back.
			scrubResponse(req, resp, back)
		}
		err = resp.Write(c)
		resp.Body.Close()
		if err != nil || req.Close || resp.Close {
			return
		}
	}
}

// prepare turns a request read from the sandbox into one for the upstream
// at hostport, with placeholders replaced by real values.
func prepare(req *http.Request, scheme, hostport string, pairs [][2]string) error {
	uri := req.RequestURI
	if len(pairs) > 0 {
		uri = replaceString(uri, pairs)
		for _, vs := range req.Header {
			for i := range vs {
				vs[i] = replaceString(vs[i], pairs)
			}
		}
		// Uncompressed responses, so that an echoed secret can be scrubbed.
		req.Header.Del("Accept-Encoding")
		if err := replaceBody(req, pairs); err != nil {
			return err
		}
	}
	u, err := url.ParseRequestURI(uri)
	if err != nil {
		return fmt.Errorf("bad request target %q", req.RequestURI)
	}
	u.Scheme, u.Host = scheme, hostport
	req.URL, req.RequestURI = u, ""
	return nil
}

func replaceBody(req *http.Request, pairs [][2]string) error {
	if req.Body == nil || req.Body == http.NoBody {
		return nil
	}
	if req.ContentLength > 0 && req.ContentLength <= maxBufferedBody {
		b, err := io.ReadAll(io.LimitReader(req.Body, req.ContentLength))
		if err != nil {
			return fmt.Errorf("read request body: %w", err)
		}
		b = []byte(replaceString(string(b), pairs))
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		return nil
	}
	req.Body = readCloser{newReplacer(req.Body, pairs), req.Body}
	req.ContentLength = -1
	return nil
}

func scrubResponse(req *http.Request, resp *http.Response, back [][2]string) {
	for _, vs := range resp.Header {
		for i := range vs {
			vs[i] = replaceString(vs[i], back)
		}
	}
	noBody := req.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent ||
		resp.StatusCode == http.StatusNotModified || resp.StatusCode < 200 || resp.ContentLength == 0
	if noBody {
		return
	}
	resp.Body = readCloser{newReplacer(resp.Body, back), resp.Body}
	resp.ContentLength = -1
	resp.TransferEncoding = []string{"chunked"}
}

// upgrade relays a protocol switch (WebSocket) as raw bytes.
func (p *Proxy) upgrade(c net.Conn, br *bufio.Reader, resp *http.Response) {
	rw, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return
	}
	defer rw.Close()
	resp.Body = nil
	if err := resp.Write(c); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { io.Copy(rw, br); done <- struct{}{} }()
	go func() { io.Copy(c, rw); done <- struct{}{} }()
	<-done
}

type readCloser struct {
	io.Reader
	io.Closer
}

func writeError(c net.Conn, status int, msg string) {
	body := msg + "\n"
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}

// secretsFor returns the sandbox's secrets that may be sent to host.
func (p *Proxy) secretsFor(ctx context.Context, host string) []Secret {
	if p.sb.Secrets == nil {
		return nil
	}
	all, err := p.sb.Secrets(ctx)
	if err != nil {
		p.cfg.Log.Error("egress proxy: load secrets", "sandbox", p.sb.ID, "err", err)
		return nil
	}
	var out []Secret
	for _, s := range all {
		if s.Value != "" && s.Placeholder != "" && netpolicy.MatchAny(s.Hosts, host) {
			out = append(out, s)
		}
	}
	return out
}
