package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockdev/airlock/internal/errdefs"
)

// entry is one entry of a test archive.
type entry struct {
	name, link string
	typ        byte
	body       string
	mode       int64
}

func file(name, body string) entry {
	return entry{name: name, typ: tar.TypeReg, body: body, mode: 0o644}
}
func dir(name string) entry { return entry{name: name, typ: tar.TypeDir, mode: 0o755} }
func symlink(name, to string) entry {
	return entry{name: name, typ: tar.TypeSymlink, link: to, mode: 0o777}
}
func hardlink(name, to string) entry {
	return entry{name: name, typ: tar.TypeLink, link: to, mode: 0o644}
}

func makeTar(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode, Size: int64(len(e.body))}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// snapshot lists everything under dir: relative path, type and content
// or link target.
func snapshot(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		s := rel + " " + fi.Mode().String()
		switch {
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			s += " " + string(b)
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			s += " -> " + l
		}
		out = append(out, s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func extract(t *testing.T, data []byte, dir string, opts ExtractOptions) (Result, error) {
	t.Helper()
	return Extract(context.Background(), bytes.NewReader(data), dir, opts)
}

func TestRoundTrip(t *testing.T) {
	src := t.TempDir()
	bin := make([]byte, 300<<10)
	for i := range bin {
		bin[i] = byte(i * 7)
	}
	mustWrite := func(p string, b []byte, mode os.FileMode) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, p), b, mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(src, p), mode)
	}
	mustWrite("a/b/c/bin.dat", bin, 0o600)
	mustWrite("a/run.sh", []byte("#!/bin/sh\necho hi\n"), 0o755)
	mustWrite("empty", nil, 0o644)
	os.Mkdir(filepath.Join(src, "emptydir"), 0o750)
	os.Chmod(filepath.Join(src, "emptydir"), 0o750)
	os.Symlink("b/c/bin.dat", filepath.Join(src, "a/link"))
	os.Symlink("../empty", filepath.Join(src, "a/up"))
	os.Link(filepath.Join(src, "a/run.sh"), filepath.Join(src, "hard.sh"))
	syscall.Mkfifo(filepath.Join(src, "fifo"), 0o644) // skipped

	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	os.Chtimes(filepath.Join(src, "a/run.sh"), old, old)
	os.Chtimes(filepath.Join(src, "a/b"), old, old)

	var buf bytes.Buffer
	wres, err := Write(context.Background(), &buf, src, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "new", "dst")
	res, err := extract(t, buf.Bytes(), dst, ExtractOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res != wres || res.Bytes != int64(len(bin))+18 {
		t.Errorf("extract result %+v, write result %+v", res, wres)
	}
	os.Remove(filepath.Join(src, "fifo"))
	if got, want := snapshot(t, dst), snapshot(t, src); !slices.Equal(got[1:], want[1:]) {
		t.Errorf("extracted tree differs:\n got %q\nwant %q", got, want)
	}
	a, _ := os.Stat(filepath.Join(dst, "a/run.sh"))
	b, _ := os.Stat(filepath.Join(dst, "hard.sh"))
	if !os.SameFile(a, b) {
		t.Error("hard link not preserved")
	}
	for _, p := range []string{"a/run.sh", "a/b"} {
		if fi, err := os.Stat(filepath.Join(dst, p)); err != nil || !fi.ModTime().Equal(old) {
			t.Errorf("%s: mtime %v, want %v (%v)", p, fi.ModTime(), old, err)
		}
	}

	// A single file archives under its base name.
	buf.Reset()
	if _, err := Write(context.Background(), &buf, filepath.Join(src, "a/run.sh"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	one := t.TempDir()
	if _, err := extract(t, buf.Bytes(), one, ExtractOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := snapshot(t, one); len(got) != 2 || got[1] != "run.sh -rwxr-xr-x #!/bin/sh\necho hi\n" {
		t.Errorf("single file: %q", got)
	}
	// A symlink named as the source is followed, down to the file.
	buf.Reset()
	if _, err := Write(context.Background(), &buf, filepath.Join(src, "a/link"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	linked := t.TempDir()
	if _, err := extract(t, buf.Bytes(), linked, ExtractOptions{}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(linked, "link")); err != nil || !bytes.Equal(b, bin) {
		t.Errorf("single file through a symlink: %d bytes, %v", len(b), err)
	}
}

func TestExtractRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []entry
		opts    ExtractOptions
		kind    error
		msg     string
	}{
		{"dotdot", []entry{file("ok", "x"), file("../escape", "x")}, ExtractOptions{}, errdefs.ErrInvalidArgument, "'..'"},
		{"dotdot inside", []entry{file("a/../../escape", "x")}, ExtractOptions{}, errdefs.ErrInvalidArgument, "'..'"},
		{"absolute", []entry{file("/abs", "x")}, ExtractOptions{}, errdefs.ErrInvalidArgument, "absolute"},
		{"symlink to root then through it", []entry{symlink("link", "/"), file("link/etc/x", "x")}, ExtractOptions{}, errdefs.ErrInvalidArgument, "absolute"},
		{"symlink up", []entry{symlink("up", "../../")}, ExtractOptions{}, errdefs.ErrInvalidArgument, "outside"},
		{"nested symlink up", []entry{symlink("a/b/up", "../../..")}, ExtractOptions{}, errdefs.ErrInvalidArgument, "outside"},
		{"symlink chain", []entry{symlink("p", "q/.."), symlink("q", ".")}, ExtractOptions{}, errdefs.ErrInvalidArgument, "resolves outside"},
		{"symlink chain deep", []entry{dir("d"), symlink("d/q", ".."), symlink("d/p", "q/..")}, ExtractOptions{}, errdefs.ErrInvalidArgument, "resolves outside"},
		{"symlink loop", []entry{symlink("a", "b/x"), symlink("b", "a/y")}, ExtractOptions{}, errdefs.ErrInvalidArgument, "too many levels"},
		{"write through chain", []entry{symlink("q", "."), symlink("p", "q"), file("p/../x", "x")}, ExtractOptions{}, errdefs.ErrInvalidArgument, "'..'"},
		{"hard link outside", []entry{hardlink("pw", "/etc/passwd")}, ExtractOptions{}, errdefs.ErrInvalidArgument, "not an entry"},
		{"hard link relative outside", []entry{hardlink("pw", "../../etc/passwd")}, ExtractOptions{}, errdefs.ErrInvalidArgument, "not an entry"},
		{"hard link to missing", []entry{hardlink("pw", "etc/passwd")}, ExtractOptions{}, errdefs.ErrInvalidArgument, "not an earlier entry"},
		{"hard link through symlink", []entry{symlink("l", "."), hardlink("pw", "l/../x")}, ExtractOptions{}, errdefs.ErrInvalidArgument, "not an entry"},
		{"char device", []entry{{name: "null", typ: tar.TypeChar, mode: 0o666}}, ExtractOptions{}, errdefs.ErrInvalidArgument, "device"},
		{"fifo", []entry{{name: "f", typ: tar.TypeFifo, mode: 0o666}}, ExtractOptions{}, errdefs.ErrInvalidArgument, "fifo"},
		{"file replaces dir", []entry{dir("d"), file("d/x", "x"), file("d", "y")}, ExtractOptions{}, errdefs.ErrConflict, "directory"},
		{"too many entries", []entry{file("1", ""), file("2", ""), file("3", ""), dir("4")}, ExtractOptions{MaxEntries: 3}, errdefs.ErrResourceExhausted, "more than 3 entries"},
		{"too many bytes", []entry{file("a", strings.Repeat("x", 600)), file("b", strings.Repeat("y", 600))}, ExtractOptions{MaxBytes: 1000}, errdefs.ErrResourceExhausted, "max_bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			target := filepath.Join(parent, "t")
			os.Mkdir(target, 0o755)
			os.WriteFile(filepath.Join(target, "keep"), []byte("old"), 0o644)
			before := snapshot(t, parent)
			_, err := extract(t, makeTar(t, tc.entries...), target, tc.opts)
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %v containing %q", err, tc.kind, tc.msg)
			}
			if after := snapshot(t, parent); !slices.Equal(before, after) {
				t.Errorf("refused extraction changed the tree:\nbefore %q\nafter  %q", before, after)
			}
		})
	}
}

func TestExtractAllowsLinksInside(t *testing.T) {
	dst := t.TempDir()
	_, err := extract(t, makeTar(t,
		dir("sub"), symlink("d", "sub"), file("d/x", "through"),
		symlink("sub/up", "../d/x"), hardlink("h", "sub/x"),
	), dst, ExtractOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "sub/up")); err != nil || string(b) != "through" {
		t.Errorf("read through links: %q %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "h")); string(b) != "through" {
		t.Errorf("hard link: %q", b)
	}
}

func TestExtractMerges(t *testing.T) {
	dst := t.TempDir()
	os.MkdirAll(filepath.Join(dst, "d/keep"), 0o755)
	os.WriteFile(filepath.Join(dst, "d/old.txt"), []byte("old"), 0o644)
	os.WriteFile(filepath.Join(dst, "d/replace.txt"), []byte("old"), 0o644)
	os.Chmod(filepath.Join(dst, "d"), 0o711)
	_, err := extract(t, makeTar(t, dir("d"), file("d/replace.txt", "new"), dir("d/new"), file("d/new/f", "f")), dst, ExtractOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		". drwx------", "d drwx--x--x", "d/keep drwxr-xr-x", "d/new drwxr-xr-x", "d/new/f -rw-r--r-- f",
		"d/old.txt -rw-r--r-- old", "d/replace.txt -rw-r--r-- new",
	}
	got := snapshot(t, dst)
	got[0] = ". drwx------" // t.TempDir's own mode varies
	if !slices.Equal(got, want) {
		t.Errorf("merged tree:\n got %q\nwant %q", got, want)
	}
	// A clash with an existing directory fails before anything moves.
	before := snapshot(t, dst)
	_, err = extract(t, makeTar(t, file("a", "new"), file("d/keep", "x")), dst, ExtractOptions{})
	if !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("file over a directory: %v, want ErrConflict", err)
	}
	if after := snapshot(t, dst); !slices.Equal(before, after) {
		t.Errorf("failed merge changed the target:\nbefore %q\nafter  %q", before, after)
	}
}

func TestExtractBadStreams(t *testing.T) {
	good := makeTar(t, file("a", "hello"))
	for _, tc := range []struct {
		name string
		data []byte
		msg  string
	}{
		{"garbage", bytes.Repeat([]byte("not a tar "), 100), "not a valid tar"},
		{"truncated", makeTar(t, file("big", strings.Repeat("x", 2000)))[:1000], "truncated"},
		{"trailing data", append(slices.Clone(good), bytes.Repeat([]byte{1}, maxTrailing+1)...), "after the end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			target := filepath.Join(parent, "new", "t")
			_, err := extract(t, tc.data, target, ExtractOptions{})
			if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want invalid argument containing %q", err, tc.msg)
			}
			if ents, _ := os.ReadDir(parent); len(ents) != 0 {
				t.Errorf("failed extraction left %v in the parent", ents)
			}
		})
	}
	// An empty stream is an empty archive.
	if res, err := extract(t, nil, t.TempDir(), ExtractOptions{}); err != nil || res.Entries != 0 {
		t.Errorf("empty stream: %+v %v", res, err)
	}
	if _, err := extract(t, good, filepath.Join(t.TempDir(), "x", "y"), ExtractOptions{}); err != nil {
		t.Errorf("into missing parents: %v", err)
	}
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o644)
	if _, err := extract(t, good, f, ExtractOptions{}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("into a file: %v, want ErrInvalidArgument", err)
	}
}

func TestExtractOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing owners needs root")
	}
	dst := filepath.Join(t.TempDir(), "owned")
	_, err := extract(t, makeTar(t, file("a/f", "x"), symlink("l", "a/f"), dir("d")), dst, ExtractOptions{Owner: &Owner{UID: 1234, GID: 2345}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"", "a", "a/f", "l", "d"} {
		fi, err := os.Lstat(filepath.Join(dst, p))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != 1234 || st.Gid != 2345 {
			t.Errorf("%s owned by %d:%d, want 1234:2345", p, st.Uid, st.Gid)
		}
	}
}

func TestWriteStopsOnContext(t *testing.T) {
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "a"), []byte("x"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Write(ctx, io.Discard, src, WriteOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled write: %v", err)
	}
}
