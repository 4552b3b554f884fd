package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/client"
)

// TestEscape runs attack probes inside real sandboxes of every runtime and
// asserts each is contained, and by what. Run it alone with
//
//	go test -count=1 -run TestEscape ./e2e/
//
// Probes that only read or fail share one sandbox; probes that exhaust a
// resource run after them, and the two that can take a gVisor sandbox
// down (fork bomb, memory bomb) get sandboxes of their own.
func TestEscape(t *testing.T) {
	requireBase(t)
	d := startDaemon(t, "")
	host := newEscapeHost(t)
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt, Template: "base", DiskMB: 64, MemoryMB: 256})
			nb := newNeighbour(t, d, rt)
			env := host.env()
			env["NB_PORT"] = strconv.Itoa(nb.port)
			env["NB_ROOT_FILE"] = filepath.Join(d.dataDir, "drivers", rt, "sandboxes", nb.sb.ID, "rootfs", "tmp", "nb-secret")
			for _, p := range escapeProbes() {
				t.Run(p.name, func(t *testing.T) { runEscapeProbe(t, sb, rt, env, p) })
			}
			t.Run("file API", func(t *testing.T) { fileAPIProbes(t, sb, host) })
			t.Run("resources", func(t *testing.T) { resourceProbes(t, d, sb) })
			t.Run("bombs", func(t *testing.T) { bombProbes(t, d, rt, nb.sb) })
			if got := host.loopbackHits.Load() + host.addrHits.Load(); got != 0 {
				t.Errorf("host listeners were reached %d times from sandboxes", got)
			}
			host.checkSysctl(t)
			host.checkSysrq(t)
		})
	}
}

// escapeProbe is one attack. The probe's program prints one word: the
// errno name that stopped it, ALLOWED if the operation went through, or
// a probe-specific verdict.
type escapeProbe struct {
	name   string   // what it tries
	user   string   // "" is the sandbox's default user
	setup  string   // shell run as root first, if any
	py     string   // python3 program, after escapePrelude
	shell  string   // or a shell command
	stop   string   // what must stop it
	want   []string // accepted verdicts
	gvisor []string // accepted verdicts under gVisor, when they differ
}

// escapePrelude gives probes raw syscalls and one-word verdicts.
const escapePrelude = `
import ctypes, errno, os, socket, stat, sys, glob
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def en(e): return errno.errorcode.get(e, str(e))
def sys_(nr, *a):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(x) for x in a])
    print("ALLOWED" if r >= 0 else en(ctypes.get_errno()))
def try_(f):
    try:
        f()
        print("ALLOWED")
    except socket.timeout:
        print("TIMEOUT")
    except OSError as e:
        print(en(e.errno))
def connect(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(3)
    try_(lambda: s.connect((host, int(port))))
E = os.environ
`

func runEscapeProbe(t *testing.T, sb *client.Sandbox, rt string, env map[string]string, p escapeProbe) {
	ctx := testCtx(t, 2*time.Minute)
	if p.setup != "" {
		res, err := sb.Exec(ctx, api.ExecRequest{Shell: p.setup, User: "root", TimeoutSeconds: 30})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: setup %q failed: %v %+v", p.name, p.setup, err, res)
		}
	}
	req := api.ExecRequest{User: p.user, Env: env, TimeoutSeconds: 30}
	if p.py != "" {
		req.Cmd = []string{"python3", "-c", escapePrelude + p.py}
	} else {
		req.Shell = p.shell
	}
	res, err := sb.Exec(ctx, req)
	if err != nil {
		t.Fatalf("%s: exec: %v", p.name, err)
	}
	got := strings.TrimSpace(res.Stdout)
	if i := strings.IndexAny(got, " \n"); i >= 0 {
		got = got[:i]
	}
	want := p.want
	if rt == api.RuntimeGVisor && p.gvisor != nil {
		want = p.gvisor
	}
	if !slices.Contains(want, got) {
		t.Errorf("ESCAPE PROBE %q (%s) as %s: got %q, want one of %v (must be stopped by: %s)\nstdout: %s\nstderr: %s",
			p.name, rt, userName(p.user), got, want, p.stop, res.Stdout, res.Stderr)
	}
}

func userName(u string) string {
	if u == "" {
		return "the default user"
	}
	return u
}

// escapeHost is what probes try to reach on the host.
type escapeHost struct {
	marker       string // a file only the host has
	loopback     net.Listener
	addr         net.Listener // on a non-loopback host address, if any
	loopbackHits atomic.Int64
	addrHits     atomic.Int64
	sleeper      *exec.Cmd // a host process to ptrace and signal
	overcommit   string    // vm.overcommit_memory before the probes
	sysrqLines   int       // host kernel log lines mentioning sysrq before the probes
}

func newEscapeHost(t *testing.T) *escapeHost {
	h := &escapeHost{marker: filepath.Join(t.TempDir(), "host-secret")}
	if err := os.WriteFile(h.marker, []byte("host secret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	if h.loopback, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	go acceptCount(h.loopback, &h.loopbackHits)
	if ip := hostAddress(); ip != "" {
		if h.addr, err = net.Listen("tcp", net.JoinHostPort(ip, "0")); err == nil {
			go acceptCount(h.addr, &h.addrHits)
		}
	}
	h.sleeper = exec.Command("sleep", "600")
	if err := h.sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile("/proc/sys/vm/overcommit_memory")
	h.overcommit = string(b)
	h.sysrqLines = hostSysrqLines(t)
	t.Cleanup(func() {
		h.loopback.Close()
		if h.addr != nil {
			h.addr.Close()
		}
		h.sleeper.Process.Kill()
		h.sleeper.Wait()
	})
	return h
}

func acceptCount(l net.Listener, hits *atomic.Int64) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		hits.Add(1)
		c.Close()
	}
}

// hostAddress is the host's first non-loopback IPv4 address.
func hostAddress() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

func (h *escapeHost) env() map[string]string {
	env := map[string]string{
		"HOST_MARKER": h.marker,
		"HOST_PORT":   strconv.Itoa(h.loopback.Addr().(*net.TCPAddr).Port),
		"HOST_PID":    strconv.Itoa(h.sleeper.Process.Pid),
		"HOST_IP":     "192.0.2.1", "HOST_IP_PORT": "9",
	}
	if h.addr != nil {
		a := h.addr.Addr().(*net.TCPAddr)
		env["HOST_IP"], env["HOST_IP_PORT"] = a.IP.String(), strconv.Itoa(a.Port)
	}
	return env
}

// checkSysctl asserts the probes that write /proc/sys changed nothing.
func (h *escapeHost) checkSysctl(t *testing.T) {
	b, _ := os.ReadFile("/proc/sys/vm/overcommit_memory")
	if string(b) != h.overcommit {
		t.Errorf("ESCAPE: host vm.overcommit_memory changed from %q to %q", h.overcommit, b)
	}
}

// neighbour is a second sandbox with a secret file and a listener.
type neighbour struct {
	sb   *client.Sandbox
	port int
}

func newNeighbour(t *testing.T, d *daemon, rt string) neighbour {
	nb := neighbour{sb: d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt, Template: "base"}), port: 8765}
	ctx := testCtx(t, time.Minute)
	res, err := nb.sb.Exec(ctx, api.ExecRequest{Shell: fmt.Sprintf(
		`echo neighbour-secret > /tmp/nb-secret
		nohup python3 -m http.server %d --bind 127.0.0.1 >/dev/null 2>&1 &
		for i in $(seq 50); do python3 -c 'import socket; socket.create_connection(("127.0.0.1", %d), 1)' 2>/dev/null && exit 0; sleep 0.1; done; exit 1`,
		nb.port, nb.port)})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("neighbour listener: %v %+v", err, res)
	}
	return nb
}
