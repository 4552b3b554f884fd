package sandbox

import (
	"bytes"
	"testing"
)

func TestCapWriter(t *testing.T) {
	for _, tc := range []struct {
		limit     int64
		writes    []string
		want      string
		truncated bool
	}{
		{10, []string{"hello"}, "hello", false},
		{5, []string{"hel", "lo"}, "hello", false},
		{4, []string{"hel", "lo", "x"}, "hell", true},
		{0, []string{"x"}, "", true},
		{3, []string{"", "ab"}, "ab", false},
	} {
		var out bytes.Buffer
		w := &CapWriter{W: &out, Limit: tc.limit}
		for _, s := range tc.writes {
			if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
				t.Fatalf("write %q: %d %v", s, n, err)
			}
		}
		if out.String() != tc.want || w.Truncated != tc.truncated {
			t.Errorf("limit %d writes %q: got %q truncated=%v", tc.limit, tc.writes, out.String(), w.Truncated)
		}
	}
}
