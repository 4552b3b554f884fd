package agentproto

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/airlockdev/airlock/internal/errdefs"
)

func TestFrameRoundTrip(t *testing.T) {
	cases := []struct {
		typ     byte
		payload []byte
	}{
		{FrameEOF, nil},
		{FrameStdout, []byte("hello")},
		{FrameData, bytes.Repeat([]byte{0xff}, MaxFrame)},
	}
	var buf bytes.Buffer
	for _, tc := range cases {
		if err := WriteFrame(&buf, tc.typ, tc.payload); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range cases {
		f, err := ReadFrame(&buf)
		if err != nil || f.Type != tc.typ || !bytes.Equal(f.Payload, tc.payload) {
			t.Fatalf("frame %q: got %q len %d, %v", tc.typ, f.Type, len(f.Payload), err)
		}
	}
	if _, err := ReadFrame(&buf); err != io.EOF {
		t.Fatalf("at end: %v, want io.EOF", err)
	}
}

func TestFrameErrors(t *testing.T) {
	if err := WriteFrame(io.Discard, FrameData, make([]byte, MaxFrame+1)); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("oversized write: %v", err)
	}
	cases := map[string][]byte{
		"oversized header": {FrameData, 0x7f, 0xff, 0xff, 0xff},
		"short header":     {FrameData, 0, 0},
		"short payload":    {FrameData, 0, 0, 0, 5, 'a'},
	}
	for name, in := range cases {
		if _, err := ReadFrame(bytes.NewReader(in)); err == nil || err == io.EOF {
			t.Errorf("%s: got %v, want an error", name, err)
		}
	}
}

func TestWireErrorSentinels(t *testing.T) {
	for _, sentinel := range []error{errdefs.ErrNotFound, errdefs.ErrInvalidArgument, errdefs.ErrConflict, errdefs.ErrResourceExhausted, errdefs.ErrDeadlineExceeded} {
		w := ToWire(errors.Join(errors.New("context"), sentinel))
		if !errors.Is(w, sentinel) {
			t.Errorf("%v did not survive the wire: %+v", sentinel, w)
		}
	}
	if w := ToWire(errors.New("boom")); w.Code != "internal" || errors.Unwrap(w) != nil {
		t.Errorf("plain error: %+v", w)
	}
}

// FuzzReadFrame checks the decoder never panics or over-allocates on
// arbitrary input from a compromised agent.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{FrameReply, 0, 0, 0, 2, '{', '}'})
	f.Add([]byte{FrameData, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		for {
			fr, err := ReadFrame(r)
			if err != nil {
				return
			}
			if len(fr.Payload) > MaxFrame {
				t.Fatalf("payload of %d bytes", len(fr.Payload))
			}
			var rep Reply
			fr.Decode(&rep)
		}
	})
}
