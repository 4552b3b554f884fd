package agent

import (
	"bytes"
	"strings"
	"testing"

	"github.com/airlockdev/airlock/internal/agentproto"
)

// collect concatenates a view's chunks per stream.
func collect(v logView) (stdout, stderr string) {
	var o, e strings.Builder
	for _, c := range v.chunks {
		if c.typ == agentproto.FrameStderr {
			e.Write(c.data)
		} else {
			o.Write(c.data)
		}
	}
	return o.String(), e.String()
}

func TestOutputLog(t *testing.T) {
	for _, tc := range []struct {
		name           string
		limit          int
		writes         []string // "o:..." or "e:..."
		from           int64
		stdout, stderr string
		dropped, next  int64
	}{
		{name: "empty", limit: 10},
		{name: "interleaved", limit: 100, writes: []string{"o:ab", "e:cd", "o:ef"}, stdout: "abef", stderr: "cd", next: 6},
		{name: "from middle of chunk", limit: 100, writes: []string{"o:abcdef"}, from: 2, stdout: "cdef", next: 6},
		{name: "oldest dropped", limit: 4, writes: []string{"o:abc", "o:def"}, stdout: "cdef", dropped: 2, next: 6},
		{name: "drop whole chunks", limit: 3, writes: []string{"o:ab", "e:cd", "o:efg"}, stdout: "efg", dropped: 4, next: 7},
		{name: "reader ahead of dropped", limit: 3, writes: []string{"o:abcdef"}, from: 4, stdout: "ef", next: 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newOutputLog(tc.limit)
			for _, w := range tc.writes {
				typ := byte(agentproto.FrameStdout)
				if w[0] == 'e' {
					typ = agentproto.FrameStderr
				}
				l.write(typ, []byte(w[2:]))
			}
			v := l.read(tc.from)
			stdout, stderr := collect(v)
			if stdout != tc.stdout || stderr != tc.stderr || v.dropped != tc.dropped || v.next != tc.next {
				t.Errorf("read(%d) = stdout %q stderr %q dropped %d next %d, want %q %q %d %d",
					tc.from, stdout, stderr, v.dropped, v.next, tc.stdout, tc.stderr, tc.dropped, tc.next)
			}
		})
	}
}

func TestOutputLogMergesAndWakes(t *testing.T) {
	l := newOutputLog(1 << 20)
	v := l.read(0)
	for range 1000 {
		l.write(agentproto.FrameStdout, []byte("k"))
	}
	select {
	case <-v.wake:
	default:
		t.Fatal("write did not wake the reader")
	}
	v = l.read(0)
	if len(v.chunks) != 1 || len(v.chunks[0].data) != 1000 {
		t.Errorf("1000 one-byte writes gave %d chunks, want 1 merged chunk", len(v.chunks))
	}
	held := v.chunks[0].data
	l.write(agentproto.FrameStdout, []byte("more"))
	if !bytes.Equal(held, bytes.Repeat([]byte("k"), 1000)) {
		t.Error("appending changed bytes a reader holds")
	}
	l.close()
	v = l.read(v.next)
	if !v.closed {
		t.Error("closed log does not say so")
	}
	l.write(agentproto.FrameStdout, []byte("late"))
	if total, _ := l.stats(); total != 1004 {
		t.Errorf("total = %d after close, want 1004 (writes after close ignored)", total)
	}
}
