package template

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/airlockdev/airlock/internal/mountinfo"
	"io"
	"io/fs"
	"os"
	"path/filepath"
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
	if err := mountinfo.UnmountAll(path); err != nil {
		return err
	}
	return os.RemoveAll(path)
}

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
