package template

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// cleanStale removes leftovers of crashed builds of name. Callers must hold
// the name's lock, which the flock extends to other processes.
func (s *Store) cleanStale(name string, out *lineWriter) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if staleName(e.Name()) != name {
			continue
		}
		p := filepath.Join(s.dir, e.Name())
		// A replaced build may still be the root of running sandboxes,
		// which name it by the template's path.
		if strings.HasPrefix(e.Name(), oldPrefix) && mountedLower(filepath.Join(s.dir, name, rootfsDir)) {
			continue
		}
		out.Printf("removing stale %s", e.Name())
		if err := removeTree(p); err != nil {
			out.Printf("removing stale %s failed: %v", e.Name(), err)
		}
	}
}

// staleName returns the template name of a ".build-<name>-<digits>" or
// ".old-<name>-<digits>" entry, or "". Names may contain '-', but the
// random suffix is all digits, so the last '-' splits unambiguously.
func staleName(entry string) string {
	rest, ok := strings.CutPrefix(entry, buildPrefix)
	if !ok {
		if rest, ok = strings.CutPrefix(entry, oldPrefix); !ok {
			return ""
		}
	}
	i := strings.LastIndexByte(rest, '-')
	if i <= 0 || i == len(rest)-1 {
		return ""
	}
	if strings.Trim(rest[i+1:], "0123456789") != "" {
		return ""
	}
	return rest[:i]
}

// lock serialises work on one template name: a channel per name within the
// process (so waiting honours ctx) and an flock across processes.
func (s *Store) lock(ctx context.Context, name string) (func(), error) {
	s.mu.Lock()
	ch, ok := s.locks[name]
	if !ok {
		ch = make(chan struct{}, 1)
		s.locks[name] = ch
	}
	s.mu.Unlock()
	select {
	case ch <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	release := func() { <-ch }

	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		release()
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(s.dir, "."+name+".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		release()
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			release()
			return nil, fmt.Errorf("lock template %q: %w", name, err)
		}
		select {
		case <-time.After(250 * time.Millisecond):
		case <-ctx.Done():
			f.Close()
			release()
			return nil, ctx.Err()
		}
	}
	return func() {
		f.Close() // drops the flock
		release()
	}, nil
}
