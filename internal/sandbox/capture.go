package sandbox

import (
	"bytes"
	"io"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// CapBuffer keeps the first Limit bytes written and counts the rest, so a
// flood of output costs the daemon no more than Limit bytes of memory while
// the producing process still runs to completion.
type CapBuffer struct {
	Limit     int64
	buf       bytes.Buffer
	Truncated bool
}

func (c *CapBuffer) Write(p []byte) (int, error) {
	room := c.Limit - int64(c.buf.Len())
	if room <= 0 {
		c.Truncated = c.Truncated || len(p) > 0
		return len(p), nil
	}
	if int64(len(p)) > room {
		c.buf.Write(p[:room])
		c.Truncated = true
		return len(p), nil
	}
	return c.buf.Write(p)
}

// String returns what was kept.
func (c *CapBuffer) String() string { return c.buf.String() }
