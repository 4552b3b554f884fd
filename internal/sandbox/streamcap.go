package sandbox

import (
	"io"

	"github.com/airlockdev/airlock/api"
)

// StreamOutputLimit returns the per-stream cap of a streamed exec:
// max_output_bytes if set, else the operator's MaxStreamBytes, which it
// may not exceed. Streaming never buffers in the daemon (the client's
// pace backpressures the command), so the cap bounds what one exec can
// push through the daemon and the network, not memory.
func (m *Manager) StreamOutputLimit(req api.ExecRequest) (int64, error) {
	switch {
	case req.MaxOutputBytes < 0:
		return 0, invalid("max_output_bytes must not be negative")
	case req.MaxOutputBytes == 0:
		return m.cfg.MaxStreamBytes, nil
	case req.MaxOutputBytes > m.cfg.MaxStreamBytes:
		return 0, invalid("max_output_bytes must be at most %d for a streamed exec, got %d", m.cfg.MaxStreamBytes, req.MaxOutputBytes)
	}
	return req.MaxOutputBytes, nil
}

// CapWriter passes the first Limit bytes to W and discards the rest, so
// the producing process runs on with its output dropped.
type CapWriter struct {
	W         io.Writer
	Limit     int64
	n         int64
	Truncated bool
}

func (c *CapWriter) Write(p []byte) (int, error) {
	room := c.Limit - c.n
	if int64(len(p)) > room {
		c.Truncated = c.Truncated || len(p) > 0
		if room <= 0 {
			return len(p), nil
		}
		if _, err := c.W.Write(p[:room]); err != nil {
			return 0, err
		}
		c.n = c.Limit
		return len(p), nil
	}
	n, err := c.W.Write(p)
	c.n += int64(n)
	return n, err
}
