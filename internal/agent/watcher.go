package agent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// maxWatchDirs caps the directories one recursive watch may cover. Each
// costs an inotify watch (kernel memory), and a watch of / would otherwise
// walk the whole filesystem.
const maxWatchDirs = 10000

const watchMask = unix.IN_CREATE | unix.IN_MODIFY | unix.IN_DELETE | unix.IN_MOVED_FROM |
	unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_EXCL_UNLINK

// watcher turns one inotify instance into ordered api.FileEvents. It is
// driven by a single goroutine (run); close may be called from any.
type watcher struct {
	root      string
	recursive bool
	maxDirs   int

	file  *os.File // the inotify fd, non-blocking, in Go's poller
	rc    syscall.RawConn
	close func()

	wds   map[int]string // watch descriptor -> directory
	paths map[string]int // directory -> watch descriptor
	// moved is a MOVED_FROM waiting for its MOVED_TO, which the kernel
	// queues right after it when both ends are watched.
	moved  *api.FileEvent
	cookie uint32
	// scanned holds entries reported by scanning a new directory, whose
	// own create event may still be queued; it is dropped as a duplicate.
	scanned  map[string]bool
	rootGone bool
}

// newWatcher watches root (a directory; a symlink to one is followed) and,
// when recursive, every directory below it.
func newWatcher(root string, recursive bool, maxDirs int) (*watcher, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return nil, pathError("watch", root, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("watch %s: not a directory: %w", root, errdefs.ErrInvalidArgument)
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, pathError("watch", root, err)
	}
	f := os.NewFile(uintptr(fd), "inotify")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("watch %s: %w", root, err)
	}
	w := &watcher{
		root: root, recursive: recursive, maxDirs: maxDirs, file: f, rc: rc,
		wds: map[int]string{}, paths: map[string]int{}, scanned: map[string]bool{},
	}
	var once sync.Once
	w.close = func() { once.Do(func() { f.Close() }) }
	if err := w.add(root, true); err != nil {
		w.close()
		return nil, err
	}
	if recursive {
		if _, err := w.addTree(root, false, nil); err != nil {
			w.close()
			return nil, err
		}
	}
	return w, nil
}

// add watches dir. The root may be a symlink; nothing below it is followed.
func (w *watcher) add(dir string, follow bool) error {
	if _, ok := w.paths[dir]; !ok && len(w.wds) >= w.maxDirs {
		return fmt.Errorf("watch %s: more than %d directories to watch; watch a smaller tree: %w",
			w.root, w.maxDirs, errdefs.ErrResourceExhausted)
	}
	mask := uint32(watchMask)
	if !follow {
		mask |= unix.IN_DONT_FOLLOW
	}
	// Through the RawConn: File.Fd would put the fd in blocking mode.
	var wd int
	var err error
	cerr := w.rc.Control(func(fd uintptr) {
		wd, err = unix.InotifyAddWatch(int(fd), dir, mask)
	})
	if cerr != nil {
		return fmt.Errorf("watch %s: %w", w.root, cerr)
	}
	if err != nil {
		if errors.Is(err, unix.ENOSPC) {
			return fmt.Errorf("watch %s: the sandbox's inotify watch limit is reached: %w", w.root, errdefs.ErrResourceExhausted)
		}
		return pathError("watch", dir, err)
	}
	if old, ok := w.paths[dir]; ok && old != wd {
		delete(w.wds, old)
	}
	w.wds[wd] = dir
	w.paths[dir] = wd
	return nil
}

// addTree watches the directories below dir (dir itself must be watched
// already, so nothing created in it meanwhile is missed). With emit it
// reports every entry found as created: they appeared in a directory
// before it was watched.
func (w *watcher) addTree(dir string, emit bool, evs []api.FileEvent) ([]api.FileEvent, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return evs, nil // gone already, or unreadable: nothing to watch
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if emit {
			evs = append(evs, fileEvent(api.FileEventCreate, p, e.IsDir()))
			w.scanned[p] = true
		}
		if !e.IsDir() {
			continue
		}
		if err := w.add(p, false); err != nil {
			if errors.Is(err, errdefs.ErrResourceExhausted) {
				return evs, err
			}
			continue // removed meanwhile
		}
		if evs, err = w.addTree(p, emit, evs); err != nil {
			return evs, err
		}
	}
	return evs, nil
}

func fileEvent(typ, p string, isDir bool) api.FileEvent {
	return api.FileEvent{Type: typ, Path: p, IsDir: isDir, Time: time.Now().UTC()}
}

// read reads queued events into buf. With wait it blocks until there are
// some (or the watcher is closed); without, n is 0 when the queue is
// empty.
func (w *watcher) read(buf []byte, wait bool) (int, error) {
	for {
		var n int
		var rerr error
		err := w.rc.Read(func(fd uintptr) bool {
			n, rerr = unix.Read(int(fd), buf)
			return rerr != unix.EAGAIN || !wait
		})
		if err != nil {
			return 0, err
		}
		switch rerr {
		case nil:
			return n, nil
		case unix.EAGAIN:
			return 0, nil
		case unix.EINTR:
			continue
		}
		return 0, fmt.Errorf("watch %s: read inotify: %w", w.root, rerr)
	}
}

// parse turns a buffer of inotify events into file events.
func (w *watcher) parse(buf []byte, evs []api.FileEvent) ([]api.FileEvent, error) {
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		wd := int(int32(binary.NativeEndian.Uint32(buf[off:])))
		mask := binary.NativeEndian.Uint32(buf[off+4:])
		cookie := binary.NativeEndian.Uint32(buf[off+8:])
		nameLen := int(binary.NativeEndian.Uint32(buf[off+12:]))
		off += unix.SizeofInotifyEvent
		if off+nameLen > len(buf) {
			break
		}
		name := strings.TrimRight(string(buf[off:off+nameLen]), "\x00")
		off += nameLen
		var err error
		if evs, err = w.handle(wd, mask, cookie, name, evs); err != nil {
			return evs, err
		}
	}
	return evs, nil
}
