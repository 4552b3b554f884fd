// Package e2e tests Airlock end to end: the real airlock and airlock-agent
// binaries, a real daemon process, real runc and gVisor sandboxes.
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"github.com/airlockdev/airlock/internal/mountinfo"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/client"
	"github.com/airlockdev/airlock/internal/template"
)

var (
	binDir       string // built airlock and airlock-agent
	templatesDir string // shared, cached templates
	haveBase     bool
)

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Println("e2e: skipping, sandboxes need root")
		os.Exit(0)
	}
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "airlock-e2e-bin-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	binDir = dir
	root, err := filepath.Abs("..")
	if err != nil {
		return 0, err
	}
	for _, b := range []struct{ out, pkg string }{
		{"airlock", "./cmd/airlock"},
		{"airlock-agent", "./cmd/airlock-agent"},
	} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, b.out), b.pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("build %s: %w\n%s", b.pkg, err, out)
		}
	}
	templatesDir = os.Getenv("AIRLOCK_TEST_TEMPLATES")
	if templatesDir == "" {
		templatesDir = "/var/lib/airlock-test/templates"
	}
	ts := template.NewStore(templatesDir)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if _, err := ts.Build(ctx, "busybox", template.BuildOptions{}, io.Discard); err != nil {
		return 0, fmt.Errorf("build busybox template: %w", err)
	}
	if os.Getenv("AIRLOCK_TEST_BASE") != "0" {
		if _, err := ts.Build(ctx, "base", template.BuildOptions{}, os.Stderr); err != nil {
			return 0, fmt.Errorf("build base template: %w", err)
		}
		haveBase = true
	}
	return m.Run(), nil
}

// runtimes lists the runtimes to test, skipping (with a message) any that
// is not installed.
func runtimes(t *testing.T) []string {
	var rts []string
	for _, rt := range []struct{ name, bin string }{{api.RuntimeGVisor, "runsc"}, {api.RuntimeRunc, "runc"}} {
		if _, err := exec.LookPath(rt.bin); err != nil {
			t.Logf("runtime %s not tested: %s is not installed", rt.name, rt.bin)
			continue
		}
		rts = append(rts, rt.name)
	}
	if len(rts) == 0 {
		t.Skip("neither runsc nor runc is installed")
	}
	return rts
}

// daemon is a running airlock serve process.
type daemon struct {
	t       *testing.T
	dataDir string
	addr    string
	cmd     *exec.Cmd
	done    chan struct{}
	logMu   sync.Mutex
	log     strings.Builder
	client  *client.Client
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startDaemon starts a daemon on dataDir ("" for a fresh one) and waits
// until it answers. The daemon and its sandboxes are cleaned up at the end
// of the test.
func startDaemon(t *testing.T, dataDir string, extra ...string) *daemon {
	t.Helper()
	fresh := dataDir == ""
	if fresh {
		dataDir = t.TempDir()
	}
	d := &daemon{t: t, dataDir: dataDir, addr: freeAddr(t), done: make(chan struct{})}
	args := append([]string{"serve", "--listen", d.addr, "--data", dataDir, "--templates", templatesDir, "--no-build"}, extra...)
	d.cmd = exec.Command(filepath.Join(binDir, "airlock"), args...)
	pr, pw := io.Pipe()
	d.cmd.Stdout, d.cmd.Stderr = pw, pw
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			d.logMu.Lock()
			d.log.WriteString(sc.Text() + "\n")
			d.logMu.Unlock()
		}
	}()
	go func() {
		d.cmd.Wait()
		pw.Close()
		close(d.done)
	}()
	c, err := client.New("http://" + d.addr)
	if err != nil {
		t.Fatal(err)
	}
	d.client = c
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + d.addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		select {
		case <-d.done:
			t.Fatalf("daemon exited during start: %s", d.logs())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon did not answer: %s", d.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if fresh {
		t.Cleanup(func() { d.cleanup() })
	}
	return d
}

func (d *daemon) logs() string {
	d.logMu.Lock()
	defer d.logMu.Unlock()
	return d.log.String()
}

// stop ends the daemon gracefully (sandboxes keep running).
func (d *daemon) stop() {
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(20 * time.Second):
		d.cmd.Process.Kill()
		<-d.done
	}
}

// kill9 kills the daemon the hard way.
func (d *daemon) kill9() {
	d.cmd.Process.Kill()
	<-d.done
}

// cleanup deletes every sandbox, stops the daemon and checks nothing leaked.
func (d *daemon) cleanup() {
	t := d.t
	select {
	case <-d.done:
		// Restart to reclaim what the dead daemon left.
		d2 := startDaemon(t, d.dataDir)
		d2.cleanupRunning()
		return
	default:
	}
	d.cleanupRunning()
}

func (d *daemon) cleanupRunning() {
	t := d.t
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	list, err := d.client.ListSandboxes(ctx, nil)
	if err != nil {
		t.Errorf("cleanup list: %v", err)
	}
	for _, sb := range list {
		if err := d.client.DeleteSandbox(ctx, sb.ID); err != nil {
			t.Errorf("cleanup delete %s: %v", sb.ID, err)
		}
	}
	d.stop()
	assertNoLeaks(t, d.dataDir)
}

// assertNoLeaks checks no process, mount or sandbox directory of dataDir
// remains.
func assertNoLeaks(t *testing.T, dataDir string) {
	t.Helper()
	if ps := processesMentioning(dataDir); len(ps) > 0 {
		t.Errorf("processes left behind: %v", ps)
	}
	if ms := mountsUnder(dataDir); len(ms) > 0 {
		t.Errorf("mounts left behind: %v", ms)
	}
	for _, rt := range []string{api.RuntimeGVisor, api.RuntimeRunc} {
		entries, _ := os.ReadDir(filepath.Join(dataDir, "drivers", rt, "sandboxes"))
		for _, e := range entries {
			t.Errorf("sandbox directory left behind: %s/%s", rt, e.Name())
		}
	}
}

// processesMentioning returns "pid cmdline" of processes whose command line
// contains s.
func processesMentioning(s string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmd := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(cmd, s) {
			out = append(out, e.Name()+" "+cmd)
		}
	}
	return out
}

func mountsUnder(dir string) []string {
	mps, _ := mountinfo.Under(dir)
	return mps
}

// cgroupsOf lists the cgroup directories of a sandbox id.
func cgroupsOf(id string) []string {
	m, _ := filepath.Glob("/sys/fs/cgroup/*/airlock/" + id)
	if _, err := os.Stat("/sys/fs/cgroup/airlock/" + id); err == nil {
		m = append(m, "/sys/fs/cgroup/airlock/"+id)
	}
	return m
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// newSandbox creates a sandbox that is deleted when the test ends.
func (d *daemon) newSandbox(t *testing.T, req api.CreateSandboxRequest) *client.Sandbox {
	t.Helper()
	if req.Template == "" {
		req.Template = "busybox"
	}
	sb, err := d.client.CreateSandbox(testCtx(t, 2*time.Minute), req)
	if err != nil {
		t.Fatalf("create sandbox (%s): %v\ndaemon log:\n%s", req.Runtime, err, d.logs())
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		d.client.DeleteSandbox(ctx, sb.ID)
	})
	return sb
}
