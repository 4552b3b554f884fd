package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// runWatcher runs w in the background; events arrive on the channel,
// which is closed with the run's error stored in *end.
func runWatcher(t *testing.T, w *watcher) (<-chan api.FileEvent, *error) {
	t.Helper()
	ch := make(chan api.FileEvent, 100000)
	var end error
	done := make(chan struct{})
	go func() {
		defer close(done)
		end = w.run(func(evs []api.FileEvent) error {
			for _, ev := range evs {
				ch <- ev
			}
			return nil
		})
		close(ch)
	}()
	t.Cleanup(func() {
		w.close()
		<-done
	})
	return ch, &end
}

// describe renders an event relative to root, like "create d/f/".
func describe(root string, ev api.FileEvent) string {
	rel := func(p string) string {
		r, _ := filepath.Rel(root, p)
		return r
	}
	s := ev.Type
	if ev.Path != "" {
		s += " " + rel(ev.Path)
	}
	if ev.NewPath != "" {
		s += " -> " + rel(ev.NewPath)
	}
	if ev.IsDir {
		s += "/"
	}
	return s
}

// expectEvents reads as many events as want holds and compares them.
func expectEvents(t *testing.T, root string, ch <-chan api.FileEvent, want ...string) {
	t.Helper()
	var got []string
	timeout := time.After(5 * time.Second)
	for len(got) < len(want) {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("watch ended; got %q, want %q", got, want)
			}
			got = append(got, describe(root, ev))
		case <-timeout:
			t.Fatalf("timed out; got %q, want %q", got, want)
		}
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("events:\n got %q\nwant %q", got, want)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestWatcherEventsInOrder(t *testing.T) {
	root := t.TempDir()
	must(t, os.Mkdir(filepath.Join(root, "sub"), 0o755))
	w, err := newWatcher(root, false, maxWatchDirs)
	must(t, err)
	ch, _ := runWatcher(t, w)
	f, g := filepath.Join(root, "f"), filepath.Join(root, "g")
	must(t, os.WriteFile(f, []byte("x"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "sub", "ignored"), nil, 0o644)) // not recursive
	must(t, os.Rename(f, g))
	must(t, os.Mkdir(filepath.Join(root, "d"), 0o755))
	must(t, os.Rename(g, filepath.Join(root, "sub", "moved-out")))
	must(t, os.Remove(filepath.Join(root, "d")))
	expectEvents(t, root, ch, "create f", "write f", "rename f -> g", "create d/", "rename g", "remove d/")
}

func TestWatcherRecursive(t *testing.T) {
	root := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(root, "old/deep"), 0o755))
	w, err := newWatcher(root, true, maxWatchDirs)
	must(t, err)
	ch, _ := runWatcher(t, w)
	must(t, os.WriteFile(filepath.Join(root, "old/deep/f"), nil, 0o644))
	expectEvents(t, root, ch, "create old/deep/f")

	// A tree made at once: each entry is reported exactly once, whether
	// inotify or the scan of the new directory saw it.
	must(t, os.MkdirAll(filepath.Join(root, "a/b/c"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "a/b/c/f"), nil, 0o644))
	expectEvents(t, root, ch, "create a/", "create a/b/", "create a/b/c/", "create a/b/c/f")

	// A directory renamed within the watch keeps reporting, by its new name.
	must(t, os.Rename(filepath.Join(root, "a"), filepath.Join(root, "z")))
	must(t, os.WriteFile(filepath.Join(root, "z/b/c/g"), nil, 0o644))
	expectEvents(t, root, ch, "rename a -> z/", "create z/b/c/g")

	// One moved out is no longer watched; one moved in is.
	outside := t.TempDir()
	must(t, os.Rename(filepath.Join(root, "z"), filepath.Join(outside, "z")))
	must(t, os.WriteFile(filepath.Join(outside, "z/b/ignored"), nil, 0o644))
	must(t, os.MkdirAll(filepath.Join(outside, "in/x"), 0o755))
	must(t, os.Rename(filepath.Join(outside, "in"), filepath.Join(root, "in")))
	must(t, os.WriteFile(filepath.Join(root, "in/x/f"), nil, 0o644))
	expectEvents(t, root, ch, "rename z/", "create in/", "create in/x/", "create in/x/f")
}

func TestWatcherRootRemoved(t *testing.T) {
	root := filepath.Join(t.TempDir(), "w")
	must(t, os.Mkdir(root, 0o755))
	must(t, os.WriteFile(filepath.Join(root, "f"), nil, 0o644))
	w, err := newWatcher(root, true, maxWatchDirs)
	must(t, err)
	ch, end := runWatcher(t, w)
	must(t, os.RemoveAll(root))
	expectEvents(t, root, ch, "remove f", "remove ./")
	for range ch {
	}
	if !errors.Is(*end, errdefs.ErrNotFound) {
		t.Errorf("watch ended with %v, want ErrNotFound", *end)
	}
}

func TestWatcherDirCap(t *testing.T) {
	root := t.TempDir()
	for i := range 3 {
		must(t, os.Mkdir(filepath.Join(root, fmt.Sprint(i)), 0o755))
	}
	if _, err := newWatcher(root, true, 3); !errors.Is(err, errdefs.ErrResourceExhausted) || !strings.Contains(err.Error(), "more than 3 directories") {
		t.Fatalf("watch over the cap: %v", err)
	}
	w, err := newWatcher(root, true, 5)
	must(t, err)
	ch, end := runWatcher(t, w)
	must(t, os.MkdirAll(filepath.Join(root, "a/b/c"), 0o755))
	for range ch {
	}
	if !errors.Is(*end, errdefs.ErrResourceExhausted) {
		t.Errorf("growing past the cap ended the watch with %v, want ErrResourceExhausted", *end)
	}
}

func TestWatcherOverflow(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	var max int
	if err != nil || func() error { _, err := fmt.Sscan(string(b), &max); return err }() != nil || max > 100000 {
		t.Skip("cannot find a small enough inotify queue to overflow")
	}
	root := t.TempDir()
	var files [2]*os.File
	for i := range files {
		f, err := os.Create(filepath.Join(root, fmt.Sprint(i)))
		must(t, err)
		defer f.Close()
		files[i] = f
	}
	w, err := newWatcher(root, true, maxWatchDirs)
	must(t, err)
	// Fill the queue before anyone reads it: writes alternating between
	// two files, so the kernel cannot fold them into one event.
	for i := range max + 10 {
		_, err := files[i%2].Write([]byte{'x'})
		must(t, err)
	}
	ch, _ := runWatcher(t, w)
	timeout := time.After(10 * time.Second)
	for n := 0; ; n++ {
		select {
		case ev := <-ch:
			if ev.Type == api.FileEventOverflow {
				if n != max {
					t.Logf("overflow after %d events", n)
				}
				return
			}
		case <-timeout:
			t.Fatal("no overflow event")
		}
	}
}

func TestWatcherRefuses(t *testing.T) {
	root := t.TempDir()
	f := filepath.Join(root, "f")
	must(t, os.WriteFile(f, nil, 0o644))
	if _, err := newWatcher(f, false, 10); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("watch a file: %v, want ErrInvalidArgument", err)
	}
	if _, err := newWatcher(filepath.Join(root, "missing"), false, 10); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("watch a missing directory: %v, want ErrNotFound", err)
	}
}
