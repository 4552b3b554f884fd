package agent

import "sync"

// outputLog is a background process's output: a bounded buffer of the
// most recent bytes, addressed by absolute offsets since the process
// started, that any number of readers follow at their own pace.
//
// Writers never block on readers: a background process must keep running
// however slow (or absent) its attachers are. When the buffer is full the
// oldest bytes are dropped, and a reader that falls behind them learns how
// many it missed.
type outputLog struct {
	mu     sync.Mutex
	limit  int
	chunks []outChunk // in offset order, contiguous
	start  int64      // offset of the first retained byte
	end    int64      // offset after the last byte written
	wake   chan struct{}
	closed bool
}

// outChunk is a run of bytes of one stream (FrameStdout or FrameStderr).
type outChunk struct {
	off  int64
	typ  byte
	data []byte
}

// mergeLimit bounds how large a chunk grows by appending small writes to
// it (keystroke echoes on a PTY), so chunks stay cheap to send and drop.
const mergeLimit = 32 << 10

func newOutputLog(limit int) *outputLog {
	return &outputLog{limit: limit, wake: make(chan struct{})}
}

// write appends p as output of stream typ. The bytes are copied.
func (l *outputLog) write(typ byte, p []byte) {
	if len(p) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if n := len(l.chunks); n > 0 && l.chunks[n-1].typ == typ && len(l.chunks[n-1].data)+len(p) <= mergeLimit {
		// Appending never changes bytes a reader already holds a slice of.
		l.chunks[n-1].data = append(l.chunks[n-1].data, p...)
	} else {
		l.chunks = append(l.chunks, outChunk{off: l.end, typ: typ, data: append(make([]byte, 0, len(p)), p...)})
	}
	l.end += int64(len(p))
	l.trim()
	l.broadcast()
}

// trim drops the oldest bytes beyond the limit.
func (l *outputLog) trim() {
	for l.end-l.start > int64(l.limit) && len(l.chunks) > 0 {
		excess := int(l.end - l.start - int64(l.limit))
		c := &l.chunks[0]
		if excess >= len(c.data) {
			l.start += int64(len(c.data))
			l.chunks[0] = outChunk{}
			l.chunks = l.chunks[1:]
			continue
		}
		c.data = c.data[excess:]
		c.off += int64(excess)
		l.start += int64(excess)
	}
}

// close marks the end of the output and wakes every reader.
func (l *outputLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		l.broadcast()
	}
}

func (l *outputLog) broadcast() {
	close(l.wake)
	l.wake = make(chan struct{})
}

// logView is what a reader gets from read: the chunks at or after its
// offset, the bytes it missed because they were dropped, where to read
// next, and a channel closed when there may be more.
type logView struct {
	chunks  []outChunk
	dropped int64
	next    int64
	closed  bool // no more output will ever come
	wake    <-chan struct{}
}

// read returns what is retained from offset from on. The chunk data is
// shared: readers must not modify it.
func (l *outputLog) read(from int64) logView {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := logView{next: l.end, closed: l.closed, wake: l.wake}
	if from < l.start {
		v.dropped = l.start - from
		from = l.start
	}
	for _, c := range l.chunks {
		cend := c.off + int64(len(c.data))
		if cend <= from {
			continue
		}
		if c.off < from {
			c.data = c.data[from-c.off:]
			c.off = from
		}
		v.chunks = append(v.chunks, c)
	}
	return v
}

// stats reports how many bytes were written in all and how many of them
// are no longer retained.
func (l *outputLog) stats() (total, dropped int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.end, l.start
}
