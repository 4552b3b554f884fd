package agent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// handle applies one inotify event to the watcher's state and appends the
// file events it stands for. Events keep the kernel's order; only a
// write repeating the one just before it is dropped.
func (w *watcher) handle(wd int, mask, cookie uint32, name string, evs []api.FileEvent) ([]api.FileEvent, error) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		evs = w.flushMoved(evs)
		evs = append(evs, api.FileEvent{Type: api.FileEventOverflow, Time: time.Now().UTC()})
		if w.recursive {
			return evs, w.rescan()
		}
		return evs, nil
	}
	dir, ok := w.wds[wd]
	if !ok {
		return evs, nil // from a watch already dropped
	}
	if mask&unix.IN_IGNORED != 0 {
		w.forget(wd, dir)
		if dir == w.root {
			w.rootGone = true
		}
		return evs, nil
	}
	isDir := mask&unix.IN_ISDIR != 0
	p := dir
	if name != "" {
		p = filepath.Join(dir, name)
	}
	if w.moved != nil && (mask&unix.IN_MOVED_TO == 0 || cookie != w.cookie) {
		evs = w.flushMoved(evs)
	}
	if mask&unix.IN_CREATE == 0 {
		delete(w.scanned, p)
	}
	switch {
	case mask&unix.IN_CREATE != 0:
		if w.scanned[p] {
			delete(w.scanned, p) // already reported by the scan of its directory
			return evs, nil
		}
		evs = append(evs, fileEvent(api.FileEventCreate, p, isDir))
		if isDir && w.recursive {
			return w.watchNew(p, evs)
		}
	case mask&unix.IN_MODIFY != 0:
		if n := len(evs); n > 0 && evs[n-1].Type == api.FileEventWrite && evs[n-1].Path == p {
			return evs, nil
		}
		evs = append(evs, fileEvent(api.FileEventWrite, p, isDir))
	case mask&unix.IN_DELETE != 0:
		evs = append(evs, fileEvent(api.FileEventRemove, p, isDir))
	case mask&unix.IN_MOVED_FROM != 0:
		ev := fileEvent(api.FileEventRename, p, isDir)
		w.moved, w.cookie = &ev, cookie
	case mask&unix.IN_MOVED_TO != 0:
		if w.moved != nil { // the other half, matched by cookie above
			ev := *w.moved
			w.moved = nil
			ev.NewPath = p
			evs = append(evs, ev)
			if isDir && w.recursive {
				w.renameTree(ev.Path, p)
			}
			return evs, nil
		}
		// Moved in from outside the watch.
		evs = append(evs, fileEvent(api.FileEventCreate, p, isDir))
		if isDir && w.recursive {
			return w.watchNew(p, evs)
		}
	case mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0:
		// A subdirectory's removal or move is reported by its parent;
		// only the root has no watched parent.
		if dir == w.root {
			typ := api.FileEventRemove
			if mask&unix.IN_MOVE_SELF != 0 {
				typ = api.FileEventRename
			}
			evs = append(evs, fileEvent(typ, w.root, true))
			w.rootGone = true
		}
	}
	return evs, nil
}

// watchNew watches a directory that appeared and everything already in it.
func (w *watcher) watchNew(dir string, evs []api.FileEvent) ([]api.FileEvent, error) {
	if err := w.add(dir, false); err != nil {
		if errors.Is(err, errdefs.ErrResourceExhausted) {
			return evs, err
		}
		return evs, nil // removed meanwhile
	}
	return w.addTree(dir, true, evs)
}

// flushMoved reports a pending MOVED_FROM that had no MOVED_TO: the entry
// left the watched tree, and so do the watches below it.
func (w *watcher) flushMoved(evs []api.FileEvent) []api.FileEvent {
	if w.moved == nil {
		return evs
	}
	ev := *w.moved
	w.moved = nil
	if ev.IsDir && w.recursive {
		w.dropTree(ev.Path)
	}
	return append(evs, ev)
}

// under lists the watched directories at or below dir.
func (w *watcher) under(dir string) []string {
	var out []string
	for p := range w.paths {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	return out
}

// renameTree follows a directory moved within the watch: its watches
// stay (they are on the inodes) but report under the new name.
func (w *watcher) renameTree(from, to string) {
	for _, p := range w.under(from) {
		wd := w.paths[p]
		np := to + strings.TrimPrefix(p, from)
		delete(w.paths, p)
		w.paths[np], w.wds[wd] = wd, np
	}
}

// dropTree removes the watches at and below dir.
func (w *watcher) dropTree(dir string) {
	for _, p := range w.under(dir) {
		wd := w.paths[p]
		w.rc.Control(func(fd uintptr) { unix.InotifyRmWatch(int(fd), uint32(wd)) })
		w.forget(wd, p)
	}
}

func (w *watcher) forget(wd int, dir string) {
	delete(w.wds, wd)
	if w.paths[dir] == wd {
		delete(w.paths, dir)
	}
}

// rescan repairs the watch list after an overflow lost events: it drops
// directories that are gone and watches those that appeared. The client
// was told to rescan, so nothing is reported.
func (w *watcher) rescan() error {
	for p, wd := range w.paths {
		if _, err := os.Lstat(p); err != nil {
			w.rc.Control(func(fd uintptr) { unix.InotifyRmWatch(int(fd), uint32(wd)) })
			w.forget(wd, p)
		}
	}
	_, err := w.addTree(w.root, false, nil)
	return err
}
