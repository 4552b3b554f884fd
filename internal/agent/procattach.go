package agent

import (
	"context"
	"io"

	"github.com/airlockdev/airlock/internal/agentproto"
)

// attach streams a background process's buffered output and, when the
// request follows, its live output until it exits, then its status. The
// daemon may send input (D), close stdin (F) and signals or resizes (C)
// on the same stream. Detaching, by closing the stream, leaves the
// process alone.
func (a *Agent) attach(ctx context.Context, s io.ReadCloser, w *frameWriter, req agentproto.ProcRequest) {
	p, err := a.procs.get(req.PID, req.Tag)
	if err != nil {
		w.fail(err)
		return
	}
	v := p.out.read(0)
	info := p.info()
	if w.replyJSON(agentproto.ProcReply{Process: &info, Dropped: v.dropped}) != nil {
		return
	}
	gone := make(chan struct{})
	go attachInput(s, p, gone)
	for {
		for _, c := range v.chunks {
			if w.frame(c.typ, c.data) != nil {
				return
			}
		}
		if v.closed {
			break
		}
		if !req.Follow {
			info := p.info()
			w.replyJSON(agentproto.ProcReply{Done: true, Process: &info})
			return
		}
		select {
		case <-v.wake:
		case <-gone:
			return
		case <-ctx.Done():
			return
		}
		v = p.out.read(v.next)
		if v.dropped > 0 && w.replyJSON(agentproto.ProcReply{Dropped: v.dropped}) != nil {
			return
		}
	}
	// The output ends just before the status is published.
	select {
	case <-p.done:
	case <-gone:
		return
	}
	info = p.info()
	if w.replyJSON(agentproto.ProcReply{Done: true, Process: &info}) == nil {
		p.markRead()
	}
}

// attachInput applies what the daemon sends on an attach stream until the
// stream ends, then closes gone. Errors (the process exited, stdin closed)
// are dropped: input to a terminal that is gone has nowhere to go.
func attachInput(s io.ReadCloser, p *bgProc, gone chan<- struct{}) {
	defer close(gone)
	for {
		f, err := agentproto.ReadFrame(s)
		if err != nil {
			s.Close()
			return
		}
		switch f.Type {
		case agentproto.FrameData:
			_ = p.writeInput(f.Payload)
		case agentproto.FrameEOF:
			_ = p.requestCloseStdin()
		case agentproto.FrameControl:
			var c agentproto.ProcControl
			if f.Decode(&c) != nil {
				continue
			}
			if c.Signal != "" {
				_ = p.signal(c.Signal)
			}
			if c.Cols != 0 || c.Rows != 0 {
				_ = p.resize(c.Cols, c.Rows)
			}
		}
	}
}
