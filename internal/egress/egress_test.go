package egress

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestReplacer(t *testing.T) {
	pairs := [][2]string{{"airlock-secret-abc", "REAL-VALUE-1"}, {"PH2", "x"}}
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"no match here", "no match here"},
		{"Bearer airlock-secret-abc", "Bearer REAL-VALUE-1"},
		{"airlock-secret-abcairlock-secret-abc", "REAL-VALUE-1REAL-VALUE-1"},
		{"a PH2 b airlock-secret-ab", "a x b airlock-secret-ab"},
		{strings.Repeat("y", 70000) + "airlock-secret-abc" + strings.Repeat("z", 5), strings.Repeat("y", 70000) + "REAL-VALUE-1" + strings.Repeat("z", 5)},
	} {
		// One byte per read: every match is split across reads.
		for name, src := range map[string]io.Reader{"whole": strings.NewReader(tc.in), "bytewise": iotest.OneByteReader(strings.NewReader(tc.in))} {
			got, err := io.ReadAll(newReplacer(src, pairs))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("%s: replace(%.40q) = %.60q, want %.60q", name, tc.in, got, tc.want)
			}
		}
		if got := replaceString(tc.in, pairs); got != tc.want {
			t.Errorf("replaceString(%.40q) = %.60q", tc.in, got)
		}
	}
}

// TestClientHelloAndCA reads the SNI of a real ClientHello, replays it into
// a TLS server that presents a certificate of the sandbox CA, and checks a
// client trusting only that CA completes the handshake.
func TestClientHelloAndCA(t *testing.T) {
	ca, err := NewCA("sb-test")
	if err != nil {
		t.Fatal(err)
	}
	ca2, err := LoadCA(ca.CertPEM(), ca.KeyPEM())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca2.CertPEM()) {
		t.Fatal("CA PEM does not parse")
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	cerr := make(chan error, 1)
	go func() {
		tc := tls.Client(a, &tls.Config{ServerName: "API.Example.com", RootCAs: roots})
		err := tc.Handshake()
		if err == nil {
			_, err = tc.Write([]byte("ping"))
		}
		cerr <- err
	}()
	b.SetDeadline(time.Now().Add(10 * time.Second))
	hello, raw, err := readClientHello(b)
	if err != nil || hello == nil {
		t.Fatalf("readClientHello: %v", err)
	}
	if hello.ServerName != "api.example.com" && hello.ServerName != "API.Example.com" {
		t.Fatalf("SNI = %q", hello.ServerName)
	}
	cert, err := ca2.leaf("api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	srv := tls.Server(&prefixConn{Conn: b, prefix: raw}, &tls.Config{Certificates: []tls.Certificate{*cert}})
	buf := make([]byte, 4)
	if _, err := io.ReadFull(srv, buf); err != nil || !bytes.Equal(buf, []byte("ping")) {
		t.Fatalf("read through intercepted TLS: %q, %v", buf, err)
	}
	if err := <-cerr; err != nil {
		t.Fatalf("client: %v", err)
	}
	// Not TLS at all: no hello, and the bytes read are returned for replay.
	c, d := net.Pipe()
	defer c.Close()
	go c.Write([]byte("GET / HTTP/1.1\r\n\r\n"))
	d.SetDeadline(time.Now().Add(5 * time.Second))
	hello, raw, _ = readClientHello(d)
	if hello != nil || len(raw) == 0 {
		t.Errorf("plain text: hello %v, raw %q", hello, raw)
	}
}
