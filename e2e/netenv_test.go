package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/vishvananda/netns"
)

// Addresses of the test "internet": a network namespace the test creates,
// linked to the host by a veth pair, holding documentation-range addresses
// (RFC 5737) that nothing else on the machine uses.
const (
	inetHostEnd  = "203.0.113.1"     // host end of the link
	inetNSEnd    = "203.0.113.2"     // test namespace end
	allowedIP    = "198.51.100.10"   // allowed.test, *.wild.test, secret.test
	deniedIP     = "198.51.100.20"   // denied.test
	cidrIP       = "198.51.100.30"   // reachable only through an allowlisted CIDR
	dnsIP        = "198.51.100.53"   // the test DNS server
	metadataIP   = "169.254.169.254" // a stand-in for cloud metadata, in the test namespace
	testSecret   = "s3cr3t-VALUE-7f3a9c1e0b"
	secretHost   = "secret.test"
	allowedHost  = "allowed.test"
	deniedHost   = "denied.test"
	metadataHost = "metadata.test" // resolves to metadataIP
)

// request is one request a test server saw.
type request struct {
	server, host, path, auth string
}

// testInternet is the test's own network: HTTP and HTTPS servers, a DNS
// server and a fake metadata endpoint inside its namespace.
type testInternet struct {
	ns     string // ip netns name
	caPEM  []byte // the test CA, trusted by the daemon's egress proxy
	caFile string

	mu   sync.Mutex
	seen []request
}

// newTestInternet creates the namespace and servers; all are removed when
// the test ends.
func newTestInternet(t *testing.T) *testInternet {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nftables is not installed (scripts/install.sh installs it)")
	}
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%100000)
	ti := &testInternet{ns: "airlock-inet-" + suffix}
	hostIf := "alinet" + suffix
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	run("ip", "netns", "add", ti.ns)
	t.Cleanup(func() {
		exec.Command("ip", "route", "del", metadataIP+"/32").Run()
		exec.Command("ip", "route", "del", "198.51.100.0/24").Run()
		exec.Command("ip", "link", "del", hostIf).Run()
		exec.Command("ip", "netns", "del", ti.ns).Run()
	})
	run("ip", "link", "add", hostIf, "type", "veth", "peer", "name", "inet0", "netns", ti.ns)
	run("ip", "addr", "add", inetHostEnd+"/30", "dev", hostIf)
	run("ip", "link", "set", hostIf, "up")
	run("ip", "-n", ti.ns, "addr", "add", inetNSEnd+"/30", "dev", "inet0")
	run("ip", "-n", ti.ns, "link", "set", "inet0", "up")
	run("ip", "-n", ti.ns, "link", "set", "lo", "up")
	for _, a := range []string{allowedIP, deniedIP, cidrIP, dnsIP, metadataIP} {
		run("ip", "-n", ti.ns, "addr", "add", a+"/32", "dev", "lo")
	}
	run("ip", "-n", ti.ns, "route", "add", "default", "via", inetHostEnd)
	run("ip", "route", "replace", "198.51.100.0/24", "via", inetNSEnd)
	// Metadata traffic that got past the rules would land here, in the
	// test's own namespace, never on a real network.
	run("ip", "route", "replace", metadataIP+"/32", "via", inetNSEnd)

	ca, caKey := newTestCA(t)
	ti.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw})
	ti.caFile = filepath.Join(t.TempDir(), "test-ca.pem")
	if err := os.WriteFile(ti.caFile, ti.caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	cert := issueTestCert(t, ca, caKey, []string{allowedHost, "*.wild.test", secretHost, deniedHost}, []net.IP{net.ParseIP(allowedIP), net.ParseIP(deniedIP)})
	for _, srv := range []struct{ name, ip string }{{"allowed-server", allowedIP}, {"denied-server", deniedIP}, {"metadata-server", metadataIP}} {
		h := ti.handler(srv.name)
		ti.serveHTTP(t, net.JoinHostPort(srv.ip, "80"), h, nil)
		ti.serveHTTP(t, net.JoinHostPort(srv.ip, "443"), h, &cert)
		ti.serveHTTP(t, net.JoinHostPort(srv.ip, "8080"), h, nil)
	}
	ti.serveHTTP(t, net.JoinHostPort(cidrIP, "8080"), ti.handler("cidr-server"), nil)
	ti.serveDNS(t)
	return ti
}

// handler answers with the server's name, and records each request.
func (ti *testInternet) handler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ti.mu.Lock()
		ti.seen = append(ti.seen, request{server: name, host: r.Host, path: r.URL.Path, auth: r.Header.Get("Authorization")})
		ti.mu.Unlock()
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		fmt.Fprintf(w, "%s\nauth=%s\nbody=%s\n", name, r.Header.Get("Authorization"), body)
	})
}

// requests returns what the servers saw for path.
func (ti *testInternet) requests(path string) []request {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	var out []request
	for _, r := range ti.seen {
		if r.path == path {
			out = append(out, r)
		}
	}
	return out
}

// inNS runs f on a thread inside the test namespace; sockets f creates
// stay in it. The thread is never unlocked, so Go discards it afterwards.
func (ti *testInternet) inNS(t *testing.T, f func() error) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		h, err := netns.GetFromName(ti.ns)
		if err != nil {
			errc <- err
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			errc <- err
			return
		}
		errc <- f()
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func (ti *testInternet) serveHTTP(t *testing.T, addr string, h http.Handler, cert *tls.Certificate) {
	var ln net.Listener
	ti.inNS(t, func() (err error) {
		ln, err = net.Listen("tcp4", addr)
		return err
	})
	if cert != nil {
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{*cert}})
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

// serveDNS answers the test names; everything else is NXDOMAIN.
func (ti *testInternet) serveDNS(t *testing.T) {
	names := map[string]string{allowedHost: allowedIP, secretHost: allowedIP, deniedHost: deniedIP, metadataHost: metadataIP}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		name := strings.TrimSuffix(strings.ToLower(q.Question[0].Name), ".")
		ip, ok := names[name]
		if strings.HasSuffix(name, ".wild.test") {
			ip, ok = allowedIP, true
		}
		switch {
		case !ok:
			m.Rcode = dns.RcodeNameError
		case q.Question[0].Qtype == dns.TypeA:
			rr, _ := dns.NewRR(fmt.Sprintf("%s 60 IN A %s", q.Question[0].Name, ip))
			m.Answer = append(m.Answer, rr)
		}
		w.WriteMsg(m)
	})
	var pc net.PacketConn
	var ln net.Listener
	ti.inNS(t, func() (err error) {
		if pc, err = net.ListenPacket("udp4", dnsIP+":53"); err != nil {
			return err
		}
		ln, err = net.Listen("tcp4", dnsIP+":53")
		return err
	})
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}} {
		go s.ActivateAndServe()
		t.Cleanup(func() { s.Shutdown() })
	}
}

// daemonArgs are the daemon flags that point sandbox networking at the
// test internet.
func (ti *testInternet) daemonArgs() []string {
	return []string{"--dns", dnsIP, "--egress-ca", ti.caFile}
}

func newTestCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "airlock e2e test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	return ca, key
}

func issueTestCert(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, names []string, ips []net.IP) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names, IPAddresses: ips,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
