package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/client"
)

// makeTree writes a test tree under dir: nested directories, binary files
// with various modes, an empty file and directory, a relative symlink and
// a hard link.
func makeTree(t *testing.T, dir string) {
	t.Helper()
	rng := rand.NewChaCha8([32]byte{3})
	files := []struct {
		name string
		size int
		mode os.FileMode
	}{
		{"a/b/c/blob.bin", 1 << 20, 0o600},
		{"a/b/small.bin", 777, 0o644},
		{"a/run.sh", 40, 0o755},
		{"empty", 0, 0o640},
		{"top.txt", 5000, 0o444},
	}
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, f.size)
		rng.Read(b)
		if err := os.WriteFile(p, b, f.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, err := range []error{
		os.Mkdir(filepath.Join(dir, "emptydir"), 0o700),
		os.Chmod(filepath.Join(dir, "emptydir"), 0o700),
		os.Symlink("b/c/blob.bin", filepath.Join(dir, "a/link")),
		os.Symlink("../top.txt", filepath.Join(dir, "a/b/up")),
		os.Link(filepath.Join(dir, "a/run.sh"), filepath.Join(dir, "hard.sh")),
		os.Chtimes(filepath.Join(dir, "a/run.sh"), treeTime, treeTime),
		os.Chtimes(filepath.Join(dir, "a/b"), treeTime, treeTime),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// treeTime is the modification time of a/run.sh and a/b in makeTree.
var treeTime = time.Unix(1577934245, 0)

// treeSnapshot lists everything under dir with its type, permissions and
// a hash of its contents or its link target.
func treeSnapshot(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		s := rel + " " + fi.Mode().String()
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			s += " " + hex.EncodeToString(sum[:8])
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

func mustExec(t *testing.T, sb *client.Sandbox, shell string) string {
	t.Helper()
	res, err := sb.Exec(testCtx(t, time.Minute), api.ExecRequest{Shell: shell})
	if err != nil {
		t.Fatalf("%s: %v", shell, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%s: exit %d: %s%s", shell, res.ExitCode, res.Stdout, res.Stderr)
	}
	return res.Stdout
}

func TestTarRoundTrip(t *testing.T) {
	d := startDaemon(t, "")
	src := t.TempDir()
	makeTree(t, src)
	want := treeSnapshot(t, src)
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt})
			ctx := testCtx(t, 2*time.Minute)
			res, err := sb.UploadDir(ctx, src, "/home/user/proj")
			if err != nil {
				t.Fatal(err)
			}
			if res.Entries != 12 || res.Bytes != 1<<20+777+40+5000 {
				t.Errorf("upload result %+v", res)
			}
			// Inside: the user owns everything, links are links.
			out := mustExec(t, sb, "cd /home/user/proj && find . | sort | xargs stat -c '%n %u %a %F' && readlink a/link && sha256sum a/b/c/blob.bin && stat -c 'mtime %Y' a/run.sh a/b")
			for _, line := range []string{"mtime 1577934245\nmtime 1577934245\n", "./a/b/c/blob.bin 1000 600 regular file", "./a/link 1000 777 symbolic link", "./emptydir 1000 700 directory", ". 1000 755 directory", "b/c/blob.bin\n"} {
				if !strings.Contains(out, line) {
					t.Errorf("in the sandbox, missing %q in:\n%s", line, out)
				}
			}
			blob, _ := os.ReadFile(filepath.Join(src, "a/b/c/blob.bin"))
			if sum := sha256.Sum256(blob); !strings.Contains(out, hex.EncodeToString(sum[:])) {
				t.Errorf("blob.bin differs in the sandbox:\n%s", out)
			}

			back := filepath.Join(t.TempDir(), "back")
			if _, err := sb.DownloadDir(ctx, "/home/user/proj", back); err != nil {
				t.Fatal(err)
			}
			if got := treeSnapshot(t, back); !slices.Equal(got, want) {
				t.Errorf("round trip differs:\n got %q\nwant %q", got, want)
			}
			a, _ := os.Stat(filepath.Join(back, "a/run.sh"))
			b, _ := os.Stat(filepath.Join(back, "hard.sh"))
			if !os.SameFile(a, b) {
				t.Error("hard link lost in the round trip")
			}

			// The raw archive: relative names, the symlink stored as a link.
			var buf bytes.Buffer
			if _, err := sb.DownloadTar(ctx, "/home/user/proj", &buf); err != nil {
				t.Fatal(err)
			}
			tr := tar.NewReader(&buf)
			var names []string
			for {
				hdr, err := tr.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				names = append(names, hdr.Name)
				if strings.HasPrefix(hdr.Name, "/") || strings.Contains(hdr.Name, "..") {
					t.Errorf("archive name %q is not relative", hdr.Name)
				}
				if hdr.Name == "a/link" && (hdr.Typeflag != tar.TypeSymlink || hdr.Linkname != "b/c/blob.bin") {
					t.Errorf("a/link stored as %+v", hdr)
				}
			}
			if len(names) != 12 {
				t.Errorf("archive holds %q", names)
			}

			// gzip uploads, and a missing sandbox path for downloads.
			var gz bytes.Buffer
			zw := gzip.NewWriter(&gz)
			zw.Write(makeTarball(t, tarFile("hello.txt", "hello")))
			zw.Close()
			if _, err := sb.UploadTar(ctx, "/home/user/gz", &gz, client.TarGzip()); err != nil {
				t.Fatal(err)
			}
			if out := mustExec(t, sb, "cat /home/user/gz/hello.txt"); out != "hello" {
				t.Errorf("gzip upload: %q", out)
			}
			if _, err := sb.DownloadTar(ctx, "/home/user/missing", io.Discard); !errors.Is(err, client.ErrNotFound) {
				t.Errorf("download a missing directory: %v, want ErrNotFound", err)
			}
		})
	}
}

type tarEntry struct {
	name, link string
	typ        byte
	body       string
}

func tarFile(name, body string) tarEntry { return tarEntry{name: name, typ: tar.TypeReg, body: body} }

func makeTarball(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: 0o644, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, e.body)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestTarRefused sends archives that try to escape the target directory
// or exhaust the sandbox, and checks each is refused with nothing written
// anywhere.
func TestTarRefused(t *testing.T) {
	d := startDaemon(t, "")
	sym := func(name, to string) tarEntry { return tarEntry{name: name, typ: tar.TypeSymlink, link: to} }
	hard := func(name, to string) tarEntry { return tarEntry{name: name, typ: tar.TypeLink, link: to} }
	many := make([]tarEntry, 51)
	for i := range many {
		many[i] = tarFile(strings.Repeat("f", i+1), "x")
	}
	big := make([]byte, 32<<20)
	rand.NewChaCha8([32]byte{5}).Read(big)
	var zeros bytes.Buffer
	zw := gzip.NewWriter(&zeros)
	zw.Write(makeTarball(t, tarEntry{name: "bomb", typ: tar.TypeReg, body: string(make([]byte, 64<<20))}))
	zw.Close()
	cases := []struct {
		name    string
		archive []byte
		opts    []client.TarOption
		kind    error
		absent  []string // paths in the sandbox that must not exist afterwards
	}{
		{"dotdot", makeTarball(t, tarFile("ok", "x"), tarFile("../escape", "x")), nil, client.ErrInvalidArgument, []string{"/home/user/escape"}},
		{"absolute", makeTarball(t, tarFile("/abs", "x")), nil, client.ErrInvalidArgument, []string{"/abs", "/home/user/t/abs"}},
		{"symlink to root then through it", makeTarball(t, sym("link", "/"), tarFile("link/etc/x", "x")), nil, client.ErrInvalidArgument, []string{"/etc/x", "/home/user/t/link"}},
		{"hard link to /etc/passwd", makeTarball(t, hard("pw", "/etc/passwd")), nil, client.ErrInvalidArgument, []string{"/home/user/t/pw"}},
		{"symlink up", makeTarball(t, sym("up", "../../")), nil, client.ErrInvalidArgument, []string{"/home/user/t/up"}},
		{"symlink chain up", makeTarball(t, sym("q", "."), sym("p", "q/..")), nil, client.ErrInvalidArgument, []string{"/home/user/t/p", "/home/user/t/q"}},
		{"too many entries", makeTarball(t, many...), []client.TarOption{client.TarMaxEntries(50)}, client.ErrResourceExhausted, []string{"/home/user/t/f"}},
		{"too many bytes", makeTarball(t, tarFile("a", strings.Repeat("a", 600)), tarFile("b", strings.Repeat("b", 600))), []client.TarOption{client.TarMaxBytes(1000)}, client.ErrResourceExhausted, []string{"/home/user/t/a", "/home/user/t/b"}},
		{"too many bytes, refused midway", makeTarball(t, tarFile("small", "x"), tarEntry{name: "big", typ: tar.TypeReg, body: string(big)}), []client.TarOption{client.TarMaxBytes(1 << 20)}, client.ErrResourceExhausted, []string{"/home/user/t/small", "/home/user/t/big"}},
		{"gzip bomb", zeros.Bytes(), []client.TarOption{client.TarGzip(), client.TarMaxBytes(1 << 20)}, client.ErrResourceExhausted, []string{"/home/user/t/bomb"}},
	}
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt})
			ctx := testCtx(t, 2*time.Minute)
			mustExec(t, sb, "mkdir /home/user/t && echo old > /home/user/t/keep")
			before := mustExec(t, sb, "ls -A /home/user /home/user/t /; md5sum /etc/passwd")
			for _, tc := range cases {
				_, err := sb.UploadTar(ctx, "/home/user/t", bytes.NewReader(tc.archive), tc.opts...)
				if !errors.Is(err, tc.kind) {
					t.Errorf("%s: %v, want %v", tc.name, err, tc.kind)
				} else {
					t.Logf("%s: %v", tc.name, err)
				}
				for _, p := range tc.absent {
					if out := mustExec(t, sb, "ls -d "+p+" 2>/dev/null; true"); out != "" {
						t.Errorf("%s: %s exists", tc.name, p)
					}
				}
				if after := mustExec(t, sb, "ls -A /home/user /home/user/t /; md5sum /etc/passwd"); after != before {
					t.Errorf("%s: the sandbox changed:\nbefore %s\nafter  %s", tc.name, before, after)
				}
			}
			// Bad targets fail before the archive is sent.
			if _, err := sb.UploadTar(ctx, "/home/user/t/keep", bytes.NewReader(makeTarball(t, tarFile("x", "x")))); !errors.Is(err, client.ErrInvalidArgument) {
				t.Errorf("into a file: %v, want ErrInvalidArgument", err)
			}
			if _, err := sb.UploadTar(ctx, "relative", bytes.NewReader(makeTarball(t, tarFile("x", "x")))); !errors.Is(err, client.ErrInvalidArgument) {
				t.Errorf("relative target: %v, want ErrInvalidArgument", err)
			}
		})
	}
}

// TestTarThroughput100MB moves a 100 MiB tree (90 files of 1 MiB, 2560 of
// 4 KiB) in and out of each runtime and logs the throughput.
func TestTarThroughput100MB(t *testing.T) {
	d := startDaemon(t, "")
	src := t.TempDir()
	rng := rand.NewChaCha8([32]byte{4})
	write := func(name string, size int) {
		b := make([]byte, size)
		rng.Read(b)
		p := filepath.Join(src, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 90 {
		write(filepath.Join("big", strings.Repeat("b", 1+i%5), "f"+string(rune('a'+i%26))+strings.Repeat("x", i/26)), 1<<20)
	}
	for i := range 2560 {
		write(filepath.Join("small", string(rune('a'+i%16)), "s"+strings.Repeat("y", i/16%8)+string(rune('a'+i/128))), 4<<10)
	}
	want := treeSnapshot(t, src)
	const mib = 1 << 20
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt, DiskMB: 1024})
			ctx := testCtx(t, 5*time.Minute)
			start := time.Now()
			res, err := sb.UploadDir(ctx, src, "/home/user/tree")
			if err != nil {
				t.Fatal(err)
			}
			up := time.Since(start)
			back := filepath.Join(t.TempDir(), "back")
			start = time.Now()
			if _, err := sb.DownloadDir(ctx, "/home/user/tree", back); err != nil {
				t.Fatal(err)
			}
			down := time.Since(start)
			if got := treeSnapshot(t, back); !slices.Equal(got, want) {
				t.Errorf("100 MiB tree differs after the round trip (%d vs %d entries)", len(got), len(want))
			}
			mb := float64(res.Bytes) / mib
			t.Logf("%s: %d entries, %.0f MiB: upload %v (%.0f MiB/s), download %v (%.0f MiB/s)",
				rt, res.Entries, mb, up.Round(time.Millisecond), mb/up.Seconds(), down.Round(time.Millisecond), mb/down.Seconds())
		})
	}
}
