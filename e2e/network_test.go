package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/client"
)

// probe is one connection attempt made from inside a sandbox.
type probe struct {
	name  string
	shell string
	want  string // stdout must contain it; "" means the command must fail
}

// sh runs a shell command in the sandbox and returns stdout+stderr and the
// exit code.
func sh(t *testing.T, sb *client.Sandbox, cmd string) (string, int) {
	t.Helper()
	res, err := sb.Exec(testCtx(t, time.Minute), api.ExecRequest{Shell: cmd, TimeoutSeconds: 30})
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	return res.Stdout + res.Stderr, res.ExitCode
}

func runProbes(t *testing.T, sb *client.Sandbox, probes []probe) {
	t.Helper()
	for _, p := range probes {
		out, code := sh(t, sb, p.shell)
		switch {
		case p.want == "" && code == 0:
			t.Errorf("%s: reached, want blocked: %s\n  output: %s", p.name, p.shell, out)
		case p.want != "" && (code != 0 || !strings.Contains(out, p.want)):
			t.Errorf("%s: want %q, got exit %d: %s\n  output: %s", p.name, p.want, code, p.shell, out)
		}
	}
}

// curl is a bounded curl; --fail makes an HTTP error a failed probe.
func curl(args string) string {
	return "curl -sS --fail -m 5 --cacert /tmp/test-ca.pem " + args
}

func newNetSandbox(t *testing.T, d *daemon, ti *testInternet, rt string, pol *api.NetworkPolicy, secrets ...string) *client.Sandbox {
	t.Helper()
	sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt, Template: "base", Network: pol, Secrets: secrets})
	if _, err := sb.Upload(testCtx(t, time.Minute), "/tmp/test-ca.pem", bytes.NewReader(ti.caPEM), 0o644); err != nil {
		t.Fatal(err)
	}
	return sb
}

func needBase(t *testing.T) {
	t.Helper()
	if !haveBase {
		t.Skip("needs the base template (curl, python3); AIRLOCK_TEST_BASE=0 skips it")
	}
}

func TestNetworkNoneHasNoRoute(t *testing.T) {
	needBase(t)
	d := startDaemon(t, "")
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt, Template: "base"})
			if sb.Network.Mode != api.NetworkNone || sb.Network.Address != "" {
				t.Errorf("default network = %+v, want mode none without address", sb.Network)
			}
			out, code := sh(t, sb, `python3 -c '
import socket, errno
s = socket.socket(); s.settimeout(3)
try:
    s.connect(("`+allowedIP+`", 80)); print("connected")
except OSError as e:
    print("errno", errno.errorcode.get(e.errno, e.errno))'`)
			// gVisor's netstack says EHOSTUNREACH where Linux says ENETUNREACH.
			if code != 0 || !strings.Contains(out, "ENETUNREACH") && !strings.Contains(out, "EHOSTUNREACH") {
				t.Errorf("connect from mode none: %s (exit %d), want no route", out, code)
			}
		})
	}
}

func TestNetworkAllowlist(t *testing.T) {
	needBase(t)
	ti := newTestInternet(t)
	d := startDaemon(t, "", ti.daemonArgs()...)
	pol := &api.NetworkPolicy{Mode: api.NetworkAllowlist, Allow: []string{allowedHost, "*.wild.test", cidrIP + "/32", metadataHost}}
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := newNetSandbox(t, d, ti, rt, pol)
			if sb.Network.Mode != api.NetworkAllowlist || sb.Network.Address == "" {
				t.Fatalf("network = %+v", sb.Network)
			}
			runProbes(t, sb, []probe{
				{"allowed name over HTTP", curl("http://allowed.test/"), "allowed-server"},
				{"allowed name over HTTPS", curl("https://allowed.test/"), "allowed-server"},
				{"wildcard name", curl("https://a.wild.test/"), "allowed-server"},
				{"wildcard name, two labels deep", curl("http://a.b.wild.test/"), "allowed-server"},
				{"allowed name, upper case with a trailing dot", curl("http://ALLOWED.test./"), "allowed-server"},
				{"listed CIDR, any port", curl("http://" + cidrIP + ":8080/"), "cidr-server"},
				{"denied name does not resolve", "getent hosts denied.test; echo rc=$?", "rc=2"},
				{"denied name by Host", curl("--resolve denied.test:80:" + deniedIP + " http://denied.test/"), ""},
				{"denied name by SNI", curl("--resolve denied.test:443:" + deniedIP + " https://denied.test/"), ""},
				{"direct IP not listed, HTTP", curl("http://" + deniedIP + "/"), ""},
				{"direct IP not listed, HTTPS without SNI", curl("https://" + deniedIP + "/"), ""},
				{"direct IP not listed, other port", curl("http://" + deniedIP + ":8080/"), ""},
				{"lying SNI lands on the allowed server", curl("--resolve allowed.test:443:" + deniedIP + " https://allowed.test/"), "allowed-server"},
				{"lying Host lands on the allowed server", curl("--resolve allowed.test:80:" + deniedIP + " http://allowed.test/"), "allowed-server"},
				{"allowed name resolving to metadata", curl("http://metadata.test/"), ""},
				{"metadata address", curl("http://" + metadataIP + ":8080/"), ""},
				{"DNS to another server is answered by Airlock", dnsQuery(deniedHost, dnsIP), "rcode=3 answers=0"},
				{"allowed name resolves", "getent hosts allowed.test", allowedIP},
			})
		})
	}
}

func TestNetworkOpen(t *testing.T) {
	needBase(t)
	ti := newTestInternet(t)
	d := startDaemon(t, "", ti.daemonArgs()...)
	// A listener on every host address: no sandbox may reach any of them.
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.0 200 OK\r\n\r\nhost-listener\n"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	open := &api.NetworkPolicy{Mode: api.NetworkOpen}
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := newNetSandbox(t, d, ti, rt, open)
			other := newNetSandbox(t, d, ti, rt, open)
			sh(t, other, `nohup python3 -m http.server 8000 >/dev/null 2>&1 & sleep 1`)
			probes := []probe{
				{"internet by name", curl("http://denied.test/"), "denied-server"},
				{"internet by name over HTTPS", curl("https://denied.test/"), "denied-server"},
				{"internet by address, other port", curl("http://" + cidrIP + ":8080/"), "cidr-server"},
				{"host loopback", curl(fmt.Sprintf("http://127.0.0.1:%d/", port)), ""},
				{"metadata, other port", curl("http://" + metadataIP + ":8080/"), ""},
				{"metadata, port 80", curl("http://" + metadataIP + "/"), ""},
				{"name resolving to metadata", curl("http://metadata.test/"), ""},
				{"another sandbox", curl("http://" + other.Network.Address + ":8000/"), ""},
				{"gateway", curl(fmt.Sprintf("http://%s:%d/", sb.Network.Gateway, port)), ""},
			}
			for _, a := range hostAddrs(t) {
				probes = append(probes,
					probe{"host address " + a, curl(fmt.Sprintf("http://%s/", net.JoinHostPort(a, fmt.Sprint(port)))), ""},
					probe{"host address " + a + " port 80", curl(fmt.Sprintf("http://%s/", net.JoinHostPort(a, "80"))), ""})
			}
			runProbes(t, sb, probes)
			// The blocked targets are real: the host reaches them.
			for _, u := range []string{"http://" + metadataIP + ":8080/", "http://" + other.Network.Address + ":8000/"} {
				out, err := exec.Command("curl", "-sS", "-m", "5", u).CombinedOutput()
				if err != nil {
					t.Errorf("host cannot reach %s, so the probe proves nothing: %v: %s", u, err, out)
				}
			}
		})
	}
}

// hostAddrs lists the host's IPv4 addresses outside the sandbox pool.
func hostAddrs(t *testing.T) []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.To4() == nil || n.IP.IsLoopback() || strings.HasPrefix(n.IP.String(), "10.89.") {
			continue
		}
		out = append(out, n.IP.String())
	}
	return out
}

func TestNetworkPolicyChange(t *testing.T) {
	needBase(t)
	ti := newTestInternet(t)
	d := startDaemon(t, "", ti.daemonArgs()...)
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			ctx := testCtx(t, 2*time.Minute)
			sb := newNetSandbox(t, d, ti, rt, &api.NetworkPolicy{Mode: api.NetworkOpen})
			runProbes(t, sb, []probe{{"open: denied.test", curl("http://denied.test/"), "denied-server"}})

			if err := sb.SetNetworkPolicy(ctx, api.NetworkPolicy{Mode: api.NetworkAllowlist, Allow: []string{allowedHost}}); err != nil {
				t.Fatal(err)
			}
			if sb.Network.Mode != api.NetworkAllowlist || len(sb.Network.Allow) != 1 {
				t.Errorf("after change: %+v", sb.Network)
			}
			runProbes(t, sb, []probe{
				{"allowlist: allowed.test", curl("http://allowed.test/"), "allowed-server"},
				{"allowlist: denied.test", curl("--resolve denied.test:80:" + deniedIP + " http://denied.test/"), ""},
				{"allowlist: CIDR not listed any more", curl("http://" + cidrIP + ":8080/"), ""},
			})
			if err := sb.SetNetworkPolicy(ctx, api.NetworkPolicy{Mode: api.NetworkNone}); err != nil {
				t.Fatal(err)
			}
			runProbes(t, sb, []probe{{"none: allowed.test", curl("--resolve allowed.test:80:" + allowedIP + " http://allowed.test/"), ""}})
			if err := sb.SetNetworkPolicy(ctx, api.NetworkPolicy{Mode: api.NetworkOpen}); err != nil {
				t.Fatal(err)
			}
			runProbes(t, sb, []probe{{"open again", curl("http://" + cidrIP + ":8080/"), "cidr-server"}})
			got, err := d.client.Sandbox(ctx, sb.ID)
			if err != nil || got.Network.Mode != api.NetworkOpen {
				t.Errorf("stored policy: %+v, %v", got, err)
			}

			none := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt})
			err = none.SetNetworkPolicy(ctx, api.NetworkPolicy{Mode: api.NetworkOpen})
			if !errors.Is(err, client.ErrConflict) || !strings.Contains(err.Error(), "network mode none") {
				t.Errorf("networking a mode none sandbox: %v, want a conflict", err)
			}
		})
	}
}

func TestNetworkValidation(t *testing.T) {
	d := startDaemon(t, "")
	ctx := testCtx(t, time.Minute)
	for _, tc := range []struct {
		name string
		req  api.CreateSandboxRequest
		want string
	}{
		{"bad mode", api.CreateSandboxRequest{Network: &api.NetworkPolicy{Mode: "bridge"}}, "network.mode must be"},
		{"bad CIDR", api.CreateSandboxRequest{Network: &api.NetworkPolicy{Mode: "allowlist", Allow: []string{"10.0.0.0/40"}}}, "not a valid CIDR"},
		{"loopback", api.CreateSandboxRequest{Network: &api.NetworkPolicy{Mode: "allowlist", Allow: []string{"127.0.0.0/8"}}}, "loopback"},
		{"bad domain", api.CreateSandboxRequest{Network: &api.NetworkPolicy{Mode: "allowlist", Allow: []string{"exa mple.com"}}}, "has character"},
		{"secret without network", api.CreateSandboxRequest{Secrets: []string{"X"}}, "secrets need network mode"},
		{"unknown secret", api.CreateSandboxRequest{Network: &api.NetworkPolicy{Mode: "open"}, Secrets: []string{"NO_SUCH"}}, `secret "NO_SUCH" is not registered`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Template = "busybox"
			_, err := d.client.CreateSandbox(ctx, tc.req)
			if !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want invalid argument containing %q", err, tc.want)
			}
		})
	}
	if list, _ := d.client.ListSandboxes(ctx, nil); len(list) != 0 {
		t.Errorf("refused creates left sandboxes: %v", list)
	}
	assertNoNetworkLeft(t, d.dataDir)
}

// TestNetworkCleanupAndRestart checks that a restarted daemon resumes a
// sandbox's network, and that deleting it leaves no namespace, interface
// or rules.
func TestNetworkCleanupAndRestart(t *testing.T) {
	needBase(t)
	ti := newTestInternet(t)
	d := startDaemon(t, "", ti.daemonArgs()...)
	rt := runtimes(t)[0]
	sb := newNetSandbox(t, d, ti, rt, &api.NetworkPolicy{Mode: api.NetworkAllowlist, Allow: []string{allowedHost}})
	id := sb.ID
	iface, table := "al-"+strings.TrimPrefix(id, "sb-"), "airlock_"+strings.ReplaceAll(id, "-", "_")
	if !linkExists(iface) || !tableExists(table) {
		t.Fatalf("interface %s or table %s missing while running", iface, table)
	}
	d.stop()
	d2 := startDaemon(t, d.dataDir, ti.daemonArgs()...)
	sb2, err := d2.client.Sandbox(testCtx(t, time.Minute), id)
	if err != nil {
		t.Fatalf("re-adopted sandbox: %v\n%s", err, d2.logs())
	}
	runProbes(t, sb2, []probe{
		{"after restart: allowed.test", curl("http://allowed.test/"), "allowed-server"},
		{"after restart: denied.test", curl("--resolve denied.test:80:" + deniedIP + " http://denied.test/"), ""},
	})
	// After a hard kill too, and deleting it removes every piece.
	d2.kill9()
	d3 := startDaemon(t, d.dataDir, "--dns", dnsIP)
	if err := d3.client.DeleteSandbox(testCtx(t, time.Minute), id); err != nil {
		t.Fatal(err)
	}
	if linkExists(iface) || tableExists(table) {
		t.Errorf("interface %s or table %s left after delete", iface, table)
	}
	assertNoNetworkLeft(t, d.dataDir)
	d3.stop()
}

// dnsQuery sends an A query for name straight to server:53 and prints the
// answer's rcode and answer count.
func dnsQuery(name, server string) string {
	return `python3 -c '
import socket, struct
q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + b"".join(bytes([len(l)]) + l.encode() for l in "` + name + `".split(".")) + b"\x00" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
s.sendto(q, ("` + server + `", 53)); r = s.recv(512)
print("rcode=%d answers=%d" % (r[3] & 15, struct.unpack(">H", r[6:8])[0]))'`
}

func linkExists(name string) bool { return exec.Command("ip", "link", "show", name).Run() == nil }

func tableExists(name string) bool {
	return exec.Command("nft", "list", "table", "inet", name).Run() == nil
}

// assertNoNetworkLeft checks a daemon's data dir holds no sandbox network
// state and its tables are gone.
func assertNoNetworkLeft(t *testing.T, dataDir string) {
	t.Helper()
	entries, _ := os.ReadDir(filepath.Join(dataDir, "network"))
	for _, e := range entries {
		t.Errorf("network state left behind: %s", e.Name())
		if linkExists("al-" + strings.TrimPrefix(e.Name(), "sb-")) {
			t.Errorf("interface of %s left behind", e.Name())
		}
	}
	out, _ := exec.CommandContext(context.Background(), "nft", "list", "tables").CombinedOutput()
	for _, e := range entries {
		if strings.Contains(string(out), "airlock_"+strings.ReplaceAll(e.Name(), "-", "_")) {
			t.Errorf("nft table of %s left behind", e.Name())
		}
	}
}
