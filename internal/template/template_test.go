package template

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/airlockdev/airlock/internal/errdefs"
)

func TestNameValidation(t *testing.T) {
	s := NewStore(t.TempDir())
	tests := []struct {
		name  string
		valid bool
	}{
		{"base", true},
		{"busybox", true},
		{"0", true},
		{"a.b_c-d", true},
		{strings.Repeat("a", 63), true},
		{strings.Repeat("a", 64), false},
		{"", false},
		{"Base", false},
		{"-x", false},
		{".hidden", false},
		{"_x", false},
		{"a/b", false},
		{"..", false},
		{"a b", false},
		{"ä", false},
	}
	for _, tt := range tests {
		_, err := s.Get(tt.name)
		if tt.valid {
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("Get(%q) = %v, want ErrNotFound", tt.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidName) || !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Get(%q) = %v, want ErrInvalidName", tt.name, err)
		}
		if _, err := s.Build(context.Background(), tt.name, BuildOptions{}, nil); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Build(%q) = %v, want ErrInvalidName", tt.name, err)
		}
		if err := s.Remove(tt.name); !errors.Is(err, ErrInvalidName) {
			t.Errorf("Remove(%q) = %v, want ErrInvalidName", tt.name, err)
		}
	}
	if _, err := s.Build(context.Background(), "nosuch", BuildOptions{}, nil); !errors.Is(err, ErrUnknownRecipe) {
		t.Errorf("Build(nosuch) = %v, want ErrUnknownRecipe", err)
	}
	if err := s.Remove("base"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Remove(base) = %v, want ErrNotFound", err)
	}
	if l, err := s.List(); err != nil || len(l) != 0 {
		t.Errorf("List() = %v, %v; want empty", l, err)
	}
}

func TestStaleName(t *testing.T) {
	for entry, want := range map[string]string{
		".build-base-123":      "base",
		".build-base-2-99":     "base-2",
		".old-busybox-1":       "busybox",
		".build-base-":         "",
		".build-base-x1":       "",
		".cache":               "",
		"base":                 "",
		".build-a.b-c-0123456": "a.b-c",
	} {
		if got := staleName(entry); got != want {
			t.Errorf("staleName(%q) = %q, want %q", entry, got, want)
		}
	}
}

func TestDebootstrapPhases(t *testing.T) {
	tr := newPhaseTracker()
	var got []string
	for _, l := range []string{
		"I: Retrieving InRelease ", "I: Retrieving Packages ", "I: Validating Packages ",
		"I: Resolving dependencies of required packages...",
		"I: Retrieving adduser 3.134", "I: Validating adduser 3.134", "I: Extracting adduser...",
		"I: Installing core packages...", "I: Unpacking required packages...",
		"I: Configuring required packages...", "I: Unpacking the base system...",
		"I: Configuring bash...", "I: Base system installed successfully.",
	} {
		if p := tr(l); p != "" {
			got = append(got, p)
		}
	}
	want := "downloading packages|extracting packages|installing packages|configuring packages"
	if strings.Join(got, "|") != want {
		t.Errorf("phases = %q, want %q", got, want)
	}
}

func requireBusybox(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: building templates needs root (chown to the agent uid)")
	}
	if _, err := findStaticBusybox(); err != nil {
		t.Skipf("skipping busybox template test: %v (apt-get install busybox-static)", err)
	}
}

func TestBusyboxBuild(t *testing.T) {
	requireBusybox(t)
	ctx := context.Background()
	s := NewStore(t.TempDir())
	var progress bytes.Buffer
	info, err := s.Build(ctx, "busybox", BuildOptions{}, &progress)
	if err != nil {
		t.Fatalf("Build: %v\n%s", err, progress.String())
	}
	if !strings.Contains(progress.String(), "template busybox: done in ") {
		t.Errorf("progress lacks done line:\n%s", progress.String())
	}
	if info.Builder != "busybox" || info.SizeBytes < 1<<20 || info.BuiltAt.IsZero() ||
		info.Path != filepath.Join(s.Dir(), "busybox", "rootfs") {
		t.Errorf("unexpected info %+v", info)
	}
	t.Logf("busybox template: %d bytes", info.SizeBytes)
	root := info.Path

	passwd, _ := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if !strings.Contains(string(passwd), "\nuser:x:1000:1000:user:/home/user:/bin/sh\n") {
		t.Errorf("passwd lacks user:\n%s", passwd)
	}
	group, _ := os.ReadFile(filepath.Join(root, "etc/group"))
	if !strings.Contains(string(group), "\nuser:x:1000:\n") {
		t.Errorf("group lacks user:\n%s", group)
	}
	checkEtc(t, root)
	for _, app := range []string{"sh", "ls", "cat", "sleep", "ps", "awk", "sed", "grep", "find", "sha256sum", "seq", "yes"} {
		if _, err := exec.LookPath(filepath.Join(root, "bin", app)); err != nil {
			if _, err2 := exec.LookPath(filepath.Join(root, "usr/bin", app)); err2 != nil {
				t.Errorf("applet %s missing: %v", app, err)
			}
		}
	}
	// The rootfs must work as one: run its shell chrooted as the agent user.
	cmd := exec.Command("/bin/sh", "-c", "id -un; echo $HOME; ls -d /tmp")
	cmd.Env = []string{"HOME=/home/user", "PATH=/bin:/usr/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "user\n/home/user\n/tmp\n" {
		t.Errorf("chroot shell: %q, %v", out, err)
	}

	again, err := s.Build(ctx, "busybox", BuildOptions{}, nil)
	if err != nil || !again.BuiltAt.Equal(info.BuiltAt) {
		t.Errorf("second Build not cached: %v %v vs %v", err, again.BuiltAt, info.BuiltAt)
	}
	got, err := s.Get("busybox")
	if err != nil || !got.BuiltAt.Equal(info.BuiltAt) || got.SizeBytes != info.SizeBytes {
		t.Errorf("Get = %+v, %v; want %+v", got, err, info)
	}
	list, err := s.List()
	if err != nil || len(list) != 1 || list[0].Name != "busybox" {
		t.Fatalf("List = %+v, %v", list, err)
	}

	time.Sleep(5 * time.Millisecond)
	forced, err := s.Build(ctx, "busybox", BuildOptions{Force: true}, nil)
	if err != nil || !forced.BuiltAt.After(info.BuiltAt) {
		t.Errorf("forced Build: %v, built %v (first %v)", err, forced.BuiltAt, info.BuiltAt)
	}
	assertNoTemp(t, s.Dir())

	if err := s.Remove("busybox"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := s.Get("busybox"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Remove = %v", err)
	}
	assertNoTemp(t, s.Dir())
}

func TestConcurrentBuild(t *testing.T) {
	requireBusybox(t)
	s := NewStore(t.TempDir())
	var wg sync.WaitGroup
	infos := make([]Info, 4)
	errs := make([]error, 4)
	for i := range infos {
		wg.Add(1)
		go func() {
			defer wg.Done()
			infos[i], errs[i] = s.Build(context.Background(), "busybox", BuildOptions{}, nil)
		}()
	}
	wg.Wait()
	for i := range infos {
		if errs[i] != nil || !infos[i].BuiltAt.Equal(infos[0].BuiltAt) {
			t.Errorf("build %d: %v, built %v (want one shared build at %v)", i, errs[i], infos[i].BuiltAt, infos[0].BuiltAt)
		}
	}
	assertNoTemp(t, s.Dir())
}

// cancelWriter cancels the build as soon as the recipe reports progress,
// i.e. after the build directory exists.
type cancelWriter struct {
	cancel context.CancelFunc
	match  string
}

func (w cancelWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.match) {
		w.cancel()
	}
	return len(p), nil
}

func TestCancelledBuild(t *testing.T) {
	requireBusybox(t)
	s := NewStore(t.TempDir())
	// A leftover from a crashed build of this name, and one of another name
	// sharing the prefix, which must survive.
	stale := filepath.Join(s.Dir(), ".build-busybox-42")
	other := filepath.Join(s.Dir(), ".build-busybox-x-42")
	for _, d := range []string{stale, other} {
		if err := os.MkdirAll(filepath.Join(d, "rootfs"), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := s.Build(ctx, "busybox", BuildOptions{}, cancelWriter{cancel, "copying"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Build = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale build dir not removed: %v", err)
	}
	if err := os.RemoveAll(other); err != nil {
		t.Fatal(err)
	}
	assertNoTemp(t, s.Dir())
	if _, err := s.Get("busybox"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after cancelled build = %v", err)
	}

	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := s.Build(ctx2, "busybox", BuildOptions{}, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Build with cancelled ctx = %v", err)
	}
	assertNoTemp(t, s.Dir())
}

// TestRemoveTreeSkipsMounts proves cleanup detaches a bind mount instead of
// deleting through it into the mounted directory.
func TestRemoveTreeSkipsMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: mounting needs root")
	}
	outside := t.TempDir()
	sentinel := filepath.Join(outside, "keep")
	if err := os.WriteFile(sentinel, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	build := filepath.Join(t.TempDir(), ".build-base-1")
	mp := filepath.Join(build, "rootfs", "proc")
	if err := os.MkdirAll(mp, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(outside, mp, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("skipping: bind mount not permitted here: %v", err)
	}
	if _, err := os.Stat(filepath.Join(mp, "keep")); err != nil {
		syscall.Unmount(mp, syscall.MNT_DETACH)
		t.Skipf("skipping: bind mount not visible: %v", err)
	}
	if err := removeTree(build); err != nil {
		syscall.Unmount(mp, syscall.MNT_DETACH)
		t.Fatalf("removeTree: %v", err)
	}
	if _, err := os.Stat(build); !os.IsNotExist(err) {
		t.Errorf("build dir still exists: %v", err)
	}
	if _, err := os.Stat(sentinel); err != nil {
		t.Errorf("file behind the mount was deleted: %v", err)
	}
}

// checkEtc checks the files every recipe writes the same way.
func checkEtc(t *testing.T, root string) {
	t.Helper()
	for rel, want := range map[string]string{
		"etc/hostname":    "sandbox\n",
		"etc/resolv.conf": "",
		"etc/hosts":       "127.0.0.1\tlocalhost\n",
	} {
		p := filepath.Join(root, rel)
		fi, err := os.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: %v, %v; want regular file 0644", rel, fi, err)
			continue
		}
		if b, _ := os.ReadFile(p); !strings.HasPrefix(string(b), want) || (want == "" && len(b) != 0) {
			t.Errorf("%s = %q, want prefix %q", rel, b, want)
		}
	}
	checkDir(t, filepath.Join(root, "home/user"), 0o755, 1000)
	checkDir(t, filepath.Join(root, ".airlock"), 0o755, 0)
	if fi, err := os.Stat(filepath.Join(root, "tmp")); err != nil || fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Errorf("/tmp: %v %v, want 1777", fi.Mode(), err)
	}
}

func checkDir(t *testing.T, path string, perm os.FileMode, uid uint32) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	st := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || fi.Mode().Perm() != perm || st.Uid != uid || st.Gid != uid {
		t.Errorf("%s: mode %v uid %d gid %d, want dir %v owned by %d", path, fi.Mode(), st.Uid, st.Gid, perm, uid)
	}
}

func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), buildPrefix) || strings.HasPrefix(e.Name(), oldPrefix) {
			t.Errorf("leftover %s in %s", e.Name(), dir)
		}
	}
}
