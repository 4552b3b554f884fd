package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
)

func writeFile(t *testing.T, c *agentproto.Client, req agentproto.Request, data []byte) (int64, error) {
	t.Helper()
	return c.WriteFile(testCtx(t), req, bytes.NewReader(data))
}

func readAll(t *testing.T, c *agentproto.Client, path string) ([]byte, error) {
	t.Helper()
	_, r, err := c.OpenFile(testCtx(t), path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

func TestWriteReadRoundTrip(t *testing.T) {
	c := newClient(t)
	dir := t.TempDir()
	data := make([]byte, 5<<20+123)
	rand.Read(data)
	path := filepath.Join(dir, "sub", "deeper", "blob.bin")

	n, err := writeFile(t, c, agentproto.Request{Path: path, Parents: true, User: "root"}, data)
	if err != nil || n != int64(len(data)) {
		t.Fatalf("write: n=%d err=%v", n, err)
	}
	info, r, err := c.OpenFile(testCtx(t), path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if want := sha256.Sum256(data); !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatal("read back different contents")
	}
	if info.Type != "file" || info.Size != int64(len(data)) || info.Mode != 0o644 || info.Name != "blob.bin" || info.Path != path {
		t.Fatalf("read info %+v", info)
	}

	// Overwrite with an explicit mode; the temporary file must be gone.
	if _, err := writeFile(t, c, agentproto.Request{Path: path, Mode: 0o600}, []byte("short")); err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, c, path)
	if err != nil || string(got) != "short" {
		t.Fatalf("reread %q, %v", got, err)
	}
	st, err := c.Stat(testCtx(t), path)
	if err != nil || st.Mode != 0o600 || st.Size != 5 {
		t.Fatalf("stat %+v, %v", st, err)
	}
	assertNoTemp(t, filepath.Dir(path))
}

func TestWriteEmptyFile(t *testing.T) {
	c := newClient(t)
	path := filepath.Join(t.TempDir(), "empty")
	if n, err := writeFile(t, c, agentproto.Request{Path: path}, nil); err != nil || n != 0 {
		t.Fatalf("n=%d err=%v", n, err)
	}
	if got, err := readAll(t, c, path); err != nil || len(got) != 0 {
		t.Fatalf("read %q, %v", got, err)
	}
}

func TestWriteErrors(t *testing.T) {
	c := newClient(t)
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "adir"), 0o755)
	os.WriteFile(filepath.Join(dir, "afile"), nil, 0o644)
	for _, tc := range []struct {
		name string
		req  agentproto.Request
		want error
	}{
		{"relative", agentproto.Request{Path: "rel/file"}, errdefs.ErrInvalidArgument},
		{"onto directory", agentproto.Request{Path: filepath.Join(dir, "adir")}, errdefs.ErrConflict},
		{"missing parent", agentproto.Request{Path: filepath.Join(dir, "nope", "f")}, errdefs.ErrNotFound},
		{"parent is a file", agentproto.Request{Path: filepath.Join(dir, "afile", "f"), Parents: true}, errdefs.ErrInvalidArgument},
		{"unknown user", agentproto.Request{Path: filepath.Join(dir, "f"), User: "no-such-user"}, errdefs.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := writeFile(t, c, tc.req, []byte("data")); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	assertNoTemp(t, dir)
}

func TestWriteDiskFull(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=256k"); err != nil {
		t.Skipf("cannot mount a small tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	c := newClient(t)
	data := make([]byte, 2<<20)
	_, err := writeFile(t, c, agentproto.Request{Path: filepath.Join(dir, "big")}, data)
	if !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("err = %v, want resource exhausted", err)
	}
	assertNoTemp(t, dir)
	// The stream was drained, so the connection still works.
	if _, err := writeFile(t, c, agentproto.Request{Path: filepath.Join(dir, "small")}, []byte("ok")); err != nil {
		t.Fatal(err)
	}
}

// failingReader yields some data, then fails, making the client abandon
// the upload mid-way.
type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errors.New("source broke")
	}
	n := min(len(p), r.n)
	r.n -= n
	return n, nil
}

func TestAbortedWriteLeavesNothing(t *testing.T) {
	c := newClient(t)
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("original"), 0o644)
	_, err := c.WriteFile(testCtx(t), agentproto.Request{Path: target}, &failingReader{n: 1 << 20})
	if err == nil {
		t.Fatal("upload with a broken source succeeded")
	}
	// The agent notices the closed stream asynchronously.
	waitFor(t, func() bool { return len(tempFiles(t, dir)) == 0 })
	if b, _ := os.ReadFile(target); string(b) != "original" {
		t.Fatalf("target changed to %d bytes", len(b))
	}
}

func TestReadErrors(t *testing.T) {
	c := newClient(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		path string
		want error
	}{
		{dir, errdefs.ErrInvalidArgument},
		{"relative", errdefs.ErrInvalidArgument},
		{filepath.Join(dir, "missing"), errdefs.ErrNotFound},
		{"/dev/null", errdefs.ErrInvalidArgument},
	} {
		if _, err := readAll(t, c, tc.path); !errors.Is(err, tc.want) {
			t.Errorf("read %s: err = %v, want %v", tc.path, err, tc.want)
		}
	}
}

func TestStatAndList(t *testing.T) {
	c := newClient(t)
	dir := t.TempDir()
	for _, d := range []string{"a/b/c/d", "z"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	os.WriteFile(filepath.Join(dir, "a", "f.txt"), []byte("12345"), 0o640)
	os.Symlink(filepath.Join(dir, "a"), filepath.Join(dir, "link"))

	st, err := c.Stat(testCtx(t), filepath.Join(dir, "link"))
	if err != nil || st.Type != "symlink" || st.LinkTarget != filepath.Join(dir, "a") {
		t.Fatalf("stat link %+v, %v", st, err)
	}
	if _, err := c.Stat(testCtx(t), filepath.Join(dir, "a", "f.txt", "x")); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("stat under a file: err = %v, want invalid argument", err)
	}
	st, err = c.Stat(testCtx(t), dir+"/a/../a/f.txt")
	if err != nil || st.Type != "file" || st.Size != 5 || st.Mode != 0o640 || st.Path != dir+"/a/f.txt" || st.UID != 0 {
		t.Fatalf("stat file %+v, %v", st, err)
	}

	for _, tc := range []struct {
		depth int
		want  []string
	}{
		{0, []string{"a", "link", "z"}},
		{2, []string{"a", "a/b", "a/f.txt", "link", "z"}},
		{10, []string{"a", "a/b", "a/b/c", "a/b/c/d", "a/f.txt", "link", "z"}},
		{99, []string{"a", "a/b", "a/b/c", "a/b/c/d", "a/f.txt", "link", "z"}},
	} {
		files, err := c.List(testCtx(t), dir, tc.depth)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range files {
			got = append(got, strings.TrimPrefix(f.Path, dir+"/"))
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("list depth %d = %v, want %v", tc.depth, got, tc.want)
		}
	}

	for _, tc := range []struct {
		path  string
		depth int
		want  error
	}{
		{filepath.Join(dir, "a", "f.txt"), 1, errdefs.ErrInvalidArgument},
		{filepath.Join(dir, "missing"), 1, errdefs.ErrNotFound},
		{"relative", 1, errdefs.ErrInvalidArgument},
		{dir, -1, errdefs.ErrInvalidArgument},
	} {
		if _, err := c.List(testCtx(t), tc.path, tc.depth); !errors.Is(err, tc.want) {
			t.Errorf("list %s depth %d: err = %v, want %v", tc.path, tc.depth, err, tc.want)
		}
	}
}

func TestMkdirRemoveRename(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t)
	dir := t.TempDir()
	p := func(rel string) string { return filepath.Join(dir, rel) }

	steps := []struct {
		name string
		do   func() error
		want error
	}{
		{"mkdir", func() error { return c.Mkdir(ctx, p("d"), false, "") }, nil},
		{"mkdir existing", func() error { return c.Mkdir(ctx, p("d"), false, "") }, errdefs.ErrConflict},
		{"mkdir -p existing", func() error { return c.Mkdir(ctx, p("d"), true, "") }, nil},
		{"mkdir missing parent", func() error { return c.Mkdir(ctx, p("x/y/z"), false, "") }, errdefs.ErrNotFound},
		{"mkdir -p", func() error { return c.Mkdir(ctx, p("x/y/z"), true, "root") }, nil},
		{"mkdir relative", func() error { return c.Mkdir(ctx, "x", true, "") }, errdefs.ErrInvalidArgument},
		{"remove missing", func() error { return c.Remove(ctx, p("missing"), false) }, errdefs.ErrNotFound},
		{"remove non-empty", func() error { return c.Remove(ctx, p("x"), false) }, errdefs.ErrConflict},
		{"remove relative", func() error { return c.Remove(ctx, "x", true) }, errdefs.ErrInvalidArgument},
		{"remove root", func() error { return c.Remove(ctx, "/", true) }, errdefs.ErrInvalidArgument},
		{"rename", func() error { return c.Rename(ctx, p("x"), p("moved")) }, nil},
		{"rename missing", func() error { return c.Rename(ctx, p("x"), p("again")) }, errdefs.ErrNotFound},
		{"rename relative target", func() error { return c.Rename(ctx, p("moved"), "again") }, errdefs.ErrInvalidArgument},
		{"remove -r", func() error { return c.Remove(ctx, p("moved"), true) }, nil},
		{"remove empty dir", func() error { return c.Remove(ctx, p("d"), false) }, nil},
	}
	for _, s := range steps {
		if err := s.do(); (s.want == nil && err != nil) || !errors.Is(err, s.want) {
			t.Fatalf("%s: err = %v, want %v", s.name, err, s.want)
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 0 {
		t.Fatalf("left in %s: %v", dir, ents)
	}
	if err := c.Mkdir(ctx, p("m"), false, ""); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p("m")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("mkdir mode %v, %v", fi.Mode(), err)
	}
}

func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".airlock-upload-") {
			found = append(found, p)
		}
		return nil
	})
	return found
}

func assertNoTemp(t *testing.T, dir string) {
	t.Helper()
	if tmp := tempFiles(t, dir); len(tmp) > 0 {
		t.Fatalf("temporary files left: %v", tmp)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal("condition not met in time")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestReadAbandoned checks a reader that stops early does not leave the
// agent blocked on flow control with the file open.
func TestReadAbandoned(t *testing.T) {
	c := newClient(t)
	path := filepath.Join(t.TempDir(), "big")
	os.WriteFile(path, make([]byte, 8<<20), 0o644)
	_, r, err := c.OpenFile(testCtx(t), path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	r.Close()
	waitFor(t, func() bool { return !fileOpen(path) })
}

// fileOpen reports whether this process has path open.
func fileOpen(path string) bool {
	ents, _ := os.ReadDir("/proc/self/fd")
	for _, e := range ents {
		if target, _ := os.Readlink("/proc/self/fd/" + e.Name()); target == path {
			return true
		}
	}
	return false
}
