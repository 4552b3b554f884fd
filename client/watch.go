package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"

	"github.com/airlockdev/airlock/api"
)

// ErrWatchClosed is returned by Watcher.Next after Close.
var ErrWatchClosed = errors.New("airlock: watch closed")

// Watcher is an open watch on a directory of a sandbox. Read its events
// with Next and release it with Close.
type Watcher struct {
	ctx    context.Context
	cancel context.CancelFunc
	body   io.ReadCloser
	dec    *json.Decoder

	mu     sync.Mutex
	closed bool
}

// Watch starts watching the directory dir in the sandbox and, if
// recursive, every directory below it, including those created later. It
// returns once the watch is in place: every change made after it returns
// is reported. Canceling ctx ends the watch, as does Close.
//
//	w, err := sb.Watch(ctx, "/home/user", true)
//	if err != nil { ... }
//	defer w.Close()
//	for {
//		ev, err := w.Next()
//		if err != nil { break } // ctx canceled, or the directory was removed (ErrNotFound)
//		fmt.Println(ev.Type, ev.Path)
//	}
func (s *Sandbox) Watch(ctx context.Context, dir string, recursive bool) (*Watcher, error) {
	p, err := sandboxPath(s.ID, "/files/watch")
	if err != nil {
		return nil, err
	}
	q := url.Values{"path": {dir}}
	if recursive {
		q.Set("recursive", "true")
	}
	ctx, cancel := context.WithCancel(ctx)
	req, err := s.c.newRequest(ctx, http.MethodGet, p, q, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := s.c.do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	return &Watcher{ctx: ctx, cancel: cancel, body: resp.Body, dec: json.NewDecoder(resp.Body)}, nil
}

// Next blocks until the next event and returns it. Events come in the
// order the sandbox saw them; an api.FileEventOverflow event means some
// were lost. When the watch ends Next returns an error: an *APIError
// matching ErrNotFound when the directory was removed or moved, or
// ErrResourceExhausted when a recursive watch outgrew its cap; ctx's error
// when it was canceled; ErrWatchClosed after Close.
func (w *Watcher) Next() (api.FileEvent, error) {
	var ev api.FileEvent
	if err := w.dec.Decode(&ev); err != nil {
		w.mu.Lock()
		closed := w.closed
		w.mu.Unlock()
		switch {
		case closed:
			return ev, ErrWatchClosed
		case w.ctx.Err() != nil:
			return ev, w.ctx.Err()
		case errors.Is(err, io.EOF):
			err = io.ErrUnexpectedEOF
		}
		return ev, fmt.Errorf("airlock: watch stream ended: %w", err)
	}
	if ev.Type == api.FileEventError {
		return ev, streamError(ev.Error)
	}
	return ev, nil
}

// Close ends the watch. It is safe to call more than once and
// concurrently with Next, which then returns ErrWatchClosed.
func (w *Watcher) Close() error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.cancel()
	return w.body.Close()
}
