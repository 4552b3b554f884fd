package template

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
)

// lineWriter prefixes every line written to the progress writer. Writers
// derived with withHook share one mutex so lines never interleave.
type lineWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	hook   func(line string) (phase string)
	buf    []byte
	tail   []string
}

const tailLines = 5

func newLineWriter(w io.Writer, prefix string) *lineWriter {
	return &lineWriter{mu: new(sync.Mutex), w: w, prefix: prefix}
}

// withHook returns a writer for command output; hook may return a phase
// line to print before the line that triggered it.
func (l *lineWriter) withHook(hook func(string) string) *lineWriter {
	return &lineWriter{mu: l.mu, w: l.w, prefix: l.prefix, hook: hook}
}

// Write never fails: a broken progress stream must not abort a build.
func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.emitLocked(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > 64<<10 {
		l.emitLocked(string(l.buf))
		l.buf = l.buf[:0]
	}
	return len(p), nil
}

func (l *lineWriter) emitLocked(line string) {
	line = strings.TrimRight(line, "\r")
	if line == "" {
		return
	}
	if l.hook != nil {
		if phase := l.hook(line); phase != "" {
			_, _ = io.WriteString(l.w, l.prefix+phase+"\n")
		}
	}
	l.tail = append(l.tail, line)
	if len(l.tail) > tailLines {
		l.tail = l.tail[1:]
	}
	_, _ = io.WriteString(l.w, l.prefix+line+"\n")
}

// Flush writes a trailing partial line, if any.
func (l *lineWriter) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.emitLocked(string(l.buf))
		l.buf = l.buf[:0]
	}
}

// Tail returns the last few lines written through Write.
func (l *lineWriter) Tail() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.tail...)
}

func (l *lineWriter) Printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = fmt.Fprintf(l.w, l.prefix+format+"\n", args...)
}

// removeTree deletes path after detaching every mount below it, so that
// RemoveAll can never descend into a still-mounted /proc, /sys or bind
// mount left behind by an interrupted debootstrap.
func removeTree(path string) error {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := unmountUnder(path); err != nil {
		return err
	}
	return os.RemoveAll(path)
}

func unmountUnder(path string) error {
	// Stacked mounts on one point need one unmount each; bound the loop.
	for range 16 {
		mps, err := mountsUnder(path)
		if err != nil {
			return err
		}
		if len(mps) == 0 {
			return nil
		}
		for _, mp := range mps {
			if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil &&
				!errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				return fmt.Errorf("unmount %s: %w", mp, err)
			}
		}
	}
	mps, err := mountsUnder(path)
	if err != nil {
		return err
	}
	if len(mps) > 0 {
		return fmt.Errorf("%s still has mounts (%s); refusing to remove it", path, strings.Join(mps, ", "))
	}
	return nil
}

// mountsUnder lists mount points at or below path, deepest first.
func mountsUnder(path string) ([]string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		real = filepath.Clean(path)
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	return parseMountsUnder(string(data), real), nil
}

func parseMountsUnder(mountinfo, dir string) []string {
	var out []string
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMountPath(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// unescapeMountPath decodes the \ooo octal escapes the kernel uses for
// space, tab, newline and backslash in mountinfo.
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// dirSize returns the disk usage of the tree at root without following
// symlinks, counting hard-linked files once.
func dirSize(root string) (int64, error) {
	type key struct{ dev, ino uint64 }
	seen := map[key]bool{}
	var total int64
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			total += fi.Size()
			return nil
		}
		if !fi.IsDir() && st.Nlink > 1 {
			k := key{uint64(st.Dev), st.Ino}
			if seen[k] {
				return nil
			}
			seen[k] = true
		}
		total += st.Blocks * 512
		return nil
	})
	return total, err
}
