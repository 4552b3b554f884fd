// Package agentproto is the wire protocol between the Airlock daemon and
// airlock-agent, the process that runs as init inside every sandbox. The
// protocol is specified in docs/AGENT_PROTOCOL.md; this package is the
// reference implementation of its framing, messages and daemon-side client.
package agentproto

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Version is the protocol version both sides announce in hello.
const Version = 1

// Frame types. A stream is a sequence of frames: a type byte, a 4-byte
// big-endian payload length and the payload.
const (
	FrameRequest = 'Q' // JSON request, first frame the daemon sends on a stream
	FrameReply   = 'A' // JSON reply or status from the agent
	FrameStdout  = 'O' // process stdout bytes
	FrameStderr  = 'E' // process stderr bytes
	FrameData    = 'D' // file bytes or process stdin bytes
	FrameEOF     = 'F' // end of the Data frames in this direction
	FrameControl = 'C' // JSON control message from the daemon (signal)
)

// MaxFrame bounds a payload so a broken peer cannot make the other side
// allocate without limit.
const MaxFrame = 1 << 20

// ChunkSize is the payload size writers use for bulk data.
const ChunkSize = 32 << 10

// ErrFrameTooLarge is returned for a frame header announcing more than MaxFrame.
var ErrFrameTooLarge = errors.New("agentproto: frame too large")

// Frame is one decoded frame.
type Frame struct {
	Type    byte
	Payload []byte
}

// WriteFrame writes one frame.
func WriteFrame(w io.Writer, typ byte, payload []byte) error {
	if len(payload) > MaxFrame {
		return ErrFrameTooLarge
	}
	var hdr [5]byte
	hdr[0] = typ
	binary.BigEndian.PutUint32(hdr[1:], uint32(len(payload)))
	if len(payload) == 0 {
		_, err := w.Write(hdr[:])
		return err
	}
	// One write keeps a frame contiguous for stream writers that may be
	// shared under a mutex.
	buf := make([]byte, 5+len(payload))
	copy(buf, hdr[:])
	copy(buf[5:], payload)
	_, err := w.Write(buf)
	return err
}

// WriteJSON writes v as a JSON frame of the given type.
func WriteJSON(w io.Writer, typ byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("agentproto: encode: %w", err)
	}
	return WriteFrame(w, typ, b)
}

// ReadFrame reads one frame. It returns io.EOF only at a frame boundary.
func ReadFrame(r io.Reader) (Frame, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return Frame{}, fmt.Errorf("agentproto: truncated frame header: %w", err)
		}
		return Frame{}, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > MaxFrame {
		return Frame{}, ErrFrameTooLarge
	}
	f := Frame{Type: hdr[0], Payload: make([]byte, n)}
	if _, err := io.ReadFull(r, f.Payload); err != nil {
		return Frame{}, fmt.Errorf("agentproto: truncated frame: %w", err)
	}
	return f, nil
}

// Decode unmarshals a JSON frame payload into v.
func (f Frame) Decode(v any) error {
	if err := json.Unmarshal(f.Payload, v); err != nil {
		return fmt.Errorf("agentproto: decode %q frame: %w", f.Type, err)
	}
	return nil
}
