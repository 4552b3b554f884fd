package agentproto

import (
	"context"
	"io"
	"sync"

	"github.com/airlockdev/airlock/api"
)

// OpWatch streams changes in a directory (docs/AGENT_PROTOCOL.md, "watch").
const OpWatch = "watch"

// WatchRequest is the request of watch.
type WatchRequest struct {
	Op        string `json:"op"`
	Path      string `json:"path"`
	Recursive bool   `json:"recursive,omitempty"`
}

// WatchReply is a reply of watch: first an empty acknowledgement once the
// watch is in place, then batches of events, and an error if the watch
// ends by itself.
type WatchReply struct {
	Error  *WireError      `json:"error,omitempty"`
	Events []api.FileEvent `json:"events,omitempty"`
}

// Watch is an open watch stream.
type Watch struct {
	ctx  context.Context
	r    io.Reader
	stop func()
	once sync.Once
}

// Watch starts watching req.Path (Op is set). It returns once the watch is
// in place, so every change made after it returns is reported.
func (c *Client) Watch(ctx context.Context, req WatchRequest) (*Watch, error) {
	req.Op = OpWatch
	s, stop, err := c.stream(ctx, req)
	if err != nil {
		return nil, err
	}
	w := &Watch{ctx: ctx, r: s, stop: stop}
	if _, err := w.Next(); err != nil {
		stop()
		return nil, err
	}
	return w, nil
}

// Next returns the next batch of events, in order. The watch ends with an
// error: the agent's reason (the directory was removed, a cap was hit) or
// the stream's.
func (w *Watch) Next() ([]api.FileEvent, error) {
	f, err := ReadFrame(w.r)
	if err != nil {
		return nil, streamErr(w.ctx, err)
	}
	if f.Type != FrameReply {
		return nil, unexpected(f)
	}
	var rep WatchReply
	if err := f.Decode(&rep); err != nil {
		return nil, err
	}
	if rep.Error != nil {
		return nil, rep.Error
	}
	return rep.Events, nil
}

// Close ends the watch.
func (w *Watch) Close() { w.once.Do(w.stop) }
