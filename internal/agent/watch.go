package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
)

const (
	// maxGather bounds the events gathered before a batch is sent, so a
	// flood of changes still streams.
	maxGather = 1024
	// maxBatch bounds the events of one reply frame.
	maxBatch = 128
	// moveWait is how long a MOVED_FROM waits for its MOVED_TO when the
	// queue ran dry between the two.
	moveWait = 10 * time.Millisecond
)

// watch streams the changes in a directory until the daemon closes the
// stream, or the directory goes away.
func (a *Agent) watch(ctx context.Context, s io.ReadCloser, w *frameWriter, payload []byte) {
	var req agentproto.WatchRequest
	if err := json.Unmarshal(payload, &req); err != nil {
		w.fail(fmt.Errorf("watch: bad request: %v: %w", err, errdefs.ErrInvalidArgument))
		return
	}
	p, err := absPath("watch", req.Path)
	if err != nil {
		w.fail(err)
		return
	}
	wt, err := newWatcher(p, req.Recursive, maxWatchDirs)
	if err != nil {
		w.fail(err)
		return
	}
	defer wt.close()
	if w.replyJSON(agentproto.WatchReply{}) != nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		io.Copy(io.Discard, s)
		cancel()
	}()
	stop := context.AfterFunc(ctx, wt.close)
	defer stop()
	err = wt.run(func(evs []api.FileEvent) error {
		return w.replyJSON(agentproto.WatchReply{Events: evs})
	})
	if err != nil && ctx.Err() == nil {
		w.fail(err)
	}
}

// run reads events and hands them to send in batches, in order, until the
// watcher is closed (an error) or the watched directory goes away.
func (w *watcher) run(send func([]api.FileEvent) error) error {
	buf := make([]byte, 64<<10)
	for {
		if w.moved != nil {
			w.file.SetReadDeadline(time.Now().Add(moveWait))
		}
		n, err := w.read(buf, true)
		w.file.SetReadDeadline(time.Time{})
		var evs []api.FileEvent
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			evs = w.flushMoved(nil)
			err = nil
		case err != nil:
			return err
		default:
			evs, err = w.parse(buf[:n], nil)
			for err == nil && len(evs) < maxGather {
				if n, err = w.read(buf, false); err != nil {
					return err
				}
				if n == 0 {
					// The queue is drained: create events for what a scan
					// reported are all in.
					clear(w.scanned)
					break
				}
				evs, err = w.parse(buf[:n], evs)
			}
		}
		for len(evs) > 0 {
			k := min(len(evs), maxBatch)
			if serr := send(evs[:k]); serr != nil {
				return serr
			}
			evs = evs[k:]
		}
		if err != nil {
			return err
		}
		if w.rootGone {
			return fmt.Errorf("watch %s: the directory was removed or moved: %w", w.root, errdefs.ErrNotFound)
		}
	}
}
