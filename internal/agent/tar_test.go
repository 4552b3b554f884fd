package agent

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// tarOf archives name -> contents, in order.
func tarOf(t *testing.T, files ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := 0; i < len(files); i += 2 {
		if err := tw.WriteHeader(&tar.Header{Name: files[i], Mode: 0o644, Size: int64(len(files[i+1])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, files[i+1])
	}
	tw.Close()
	return buf.Bytes()
}

// entriesOf lists what dir holds, staging directories included.
func entriesOf(t *testing.T, dir string) []string {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func TestTarWriteRead(t *testing.T) {
	c := newClient(t)
	dir := filepath.Join(t.TempDir(), "new")
	rep, err := c.WriteTar(testCtx(t), agentproto.TarRequest{Path: dir}, bytes.NewReader(tarOf(t, "a/b.txt", "hello", "c.txt", "world")))
	if err != nil || rep.Entries != 2 || rep.Bytes != 10 {
		t.Fatalf("write: %+v %v", rep, err)
	}
	r, err := c.ReadTar(testCtx(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tr := tar.NewReader(r)
	var got []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got = append(got, hdr.Name+"="+string(b))
	}
	if want := "a/=|a/b.txt=hello|c.txt=world"; strings.Join(got, "|") != want {
		t.Errorf("read back %q, want %q", got, want)
	}
	if _, err := c.ReadTar(testCtx(t), filepath.Join(dir, "missing")); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("read a missing directory: %v", err)
	}
	if _, err := c.WriteTar(testCtx(t), agentproto.TarRequest{Path: filepath.Join(dir, "c.txt")}, bytes.NewReader(nil)); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("write into a file: %v", err)
	}
}

func TestTarWriteRefusedMidway(t *testing.T) {
	c := newClient(t)
	dir := t.TempDir()
	big := strings.Repeat("x", 4<<20)
	_, err := c.WriteTar(testCtx(t), agentproto.TarRequest{Path: dir, MaxBytes: 1 << 20}, bytes.NewReader(tarOf(t, "small", "x", "big", big, "after", "y")))
	if !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("over max_bytes: %v", err)
	}
	if ents := entriesOf(t, dir); len(ents) != 0 {
		t.Errorf("refused archive left %v", ents)
	}
	// The stream was drained: the connection still works.
	if _, err := c.WriteTar(testCtx(t), agentproto.TarRequest{Path: dir}, bytes.NewReader(tarOf(t, "ok", "1"))); err != nil {
		t.Fatal(err)
	}
}

func TestTarWriteAborted(t *testing.T) {
	c := newClient(t)
	dir := t.TempDir()
	archive := tarOf(t, "a", strings.Repeat("a", 1<<20), "b", strings.Repeat("b", 1<<20))
	_, err := c.WriteTar(testCtx(t), agentproto.TarRequest{Path: dir}, io.MultiReader(bytes.NewReader(archive[:1<<20]), &failingReader{}))
	if err == nil {
		t.Fatal("upload with a broken source succeeded")
	}
	// The agent notices the closed stream asynchronously.
	waitFor(t, func() bool { return len(entriesOf(t, dir)) == 0 })
}

func TestTarWriteDiskFull(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=256k"); err != nil {
		t.Skipf("cannot mount a small tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	c := newClient(t)
	_, err := c.WriteTar(testCtx(t), agentproto.TarRequest{Path: filepath.Join(dir, "t")}, bytes.NewReader(tarOf(t, "a", "1", "big", strings.Repeat("x", 1<<20))))
	if !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("err = %v, want resource exhausted", err)
	}
	if ents := entriesOf(t, dir); len(ents) != 0 {
		t.Errorf("failed extraction left %v", ents)
	}
}

func TestWatchOverProtocol(t *testing.T) {
	c := newClient(t)
	dir := t.TempDir()
	w, err := c.Watch(testCtx(t), agentproto.WatchRequest{Path: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	os.WriteFile(filepath.Join(dir, "f"), nil, 0o644)
	evs, err := w.Next()
	if err != nil || len(evs) == 0 || evs[0].Type != "create" || evs[0].Path != filepath.Join(dir, "f") {
		t.Fatalf("events %+v, %v", evs, err)
	}
	if _, err := c.Watch(testCtx(t), agentproto.WatchRequest{Path: "relative"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("relative path: %v", err)
	}
	// Removing the directory ends the watch with not_found.
	os.RemoveAll(dir)
	for {
		if _, err = w.Next(); err != nil {
			break
		}
	}
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("watch ended with %v, want ErrNotFound", err)
	}
}
