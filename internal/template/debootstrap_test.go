package template

import (
	"context"
	"errors"
	"github.com/airlockdev/airlock/internal/mountinfo"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// requireDebootstrap gates the slow tests. Set AIRLOCK_TEST_TEMPLATE_DIR to
// keep the result and the .deb cache between runs.
func requireDebootstrap(t *testing.T) string {
	t.Helper()
	if os.Getenv("AIRLOCK_TEST_DEBOOTSTRAP") != "1" {
		t.Skip("skipping debootstrap build (slow, needs network): set AIRLOCK_TEST_DEBOOTSTRAP=1 to run")
	}
	if os.Geteuid() != 0 {
		t.Skip("skipping: debootstrap needs root")
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		t.Skip("skipping: debootstrap not installed")
	}
	if dir := os.Getenv("AIRLOCK_TEST_TEMPLATE_DIR"); dir != "" {
		return dir
	}
	return t.TempDir()
}

func TestDebootstrapBuild(t *testing.T) {
	dir := requireDebootstrap(t)
	s := NewStore(dir)
	start := time.Now()
	info, err := s.Build(context.Background(), "base", BuildOptions{Force: true}, testWriter{t})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	t.Logf("base built in %s: %d bytes, packages %v", time.Since(start).Round(time.Second), info.SizeBytes, info.Packages)
	root := info.Path
	passwd, _ := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if !strings.Contains(string(passwd), "\nuser:x:1000:1000:user:/home/user:/bin/bash\n") {
		t.Errorf("passwd lacks user:\n%s", passwd)
	}
	checkEtc(t, root)
	if debs, _ := filepath.Glob(filepath.Join(root, "var/cache/apt/archives/*.deb")); len(debs) > 0 {
		t.Errorf("%d .debs left in the rootfs", len(debs))
	}
	if lists, _ := filepath.Glob(filepath.Join(root, "var/lib/apt/lists/*_Packages")); len(lists) > 0 {
		t.Errorf("apt lists left: %v", lists)
	}
	cmd := exec.Command("/bin/bash", "-c", `id -un && python3 -c 'print(6*7)' && git --version >/dev/null && curl --version >/dev/null && test -x /usr/bin/ps && test ! -e /usr/share/man/man1`)
	cmd.Env = []string{"HOME=/home/user", "PATH=/usr/local/bin:/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "user\n42\n" {
		t.Errorf("chroot check: %q, %v", out, err)
	}
	assertNoTemp(t, dir)
}

// TestDebootstrapCancel cancels while debootstrap configures packages, when
// /proc and /sys are mounted inside the target, and checks nothing remains.
func TestDebootstrapCancel(t *testing.T) {
	dir := requireDebootstrap(t)
	s := NewStore(dir)
	before, _ := s.Get("base")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &phaseCanceller{t: t, cancel: cancel, phase: "template base: configuring packages", dir: dir}
	_, err := s.Build(ctx, "base", BuildOptions{Force: true}, w)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Build = %v, want context.Canceled", err)
	}
	assertNoTemp(t, dir)
	if mps, err := mountinfo.Under(dir); err != nil || len(mps) > 0 {
		t.Errorf("mounts left under %s: %v %v", dir, mps, err)
	}
	// A cancelled forced rebuild must leave the previous build in place.
	if after, err := s.Get("base"); !after.BuiltAt.Equal(before.BuiltAt) {
		t.Errorf("previous build changed: %v (%v -> %v)", err, before.BuiltAt, after.BuiltAt)
	}
}

type phaseCanceller struct {
	t      *testing.T
	cancel context.CancelFunc
	phase  string
	dir    string
	once   sync.Once
}

func (w *phaseCanceller) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.phase) {
		// Let debootstrap get into its chroot work before pulling the plug.
		w.once.Do(func() {
			time.AfterFunc(2*time.Second, func() {
				mps, _ := mountinfo.Under(w.dir)
				w.t.Logf("cancelling; mounts under store: %v", mps)
				w.cancel()
			})
		})
	}
	return len(p), nil
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
