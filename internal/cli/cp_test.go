package cli

import (
	"strings"
	"testing"
)

func TestParseCpSpec(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want cpSpec
		err  string
	}{
		{in: "sb-123:/home/user/a.txt", want: cpSpec{ID: "sb-123", Path: "/home/user/a.txt"}},
		{in: "sb-123:/", want: cpSpec{ID: "sb-123", Path: "/"}},
		{in: "sb-123:/dir/", want: cpSpec{ID: "sb-123", Path: "/dir/"}},
		{in: "sb-1:/a:b", want: cpSpec{ID: "sb-1", Path: "/a:b"}},
		{in: "local.txt", want: cpSpec{Path: "local.txt"}},
		{in: "-", want: cpSpec{Path: "-"}},
		{in: "/abs/path", want: cpSpec{Path: "/abs/path"}},
		{in: "./a:b", want: cpSpec{Path: "./a:b"}},
		{in: "dir/a:b", want: cpSpec{Path: "dir/a:b"}},
		{in: ":/x", want: cpSpec{Path: ":/x"}},
		{in: "sb-123:", err: "missing path"},
		{in: "sb-123:rel/path", err: "must be absolute"},
		{in: "", err: "empty"},
	} {
		got, err := parseCpSpec(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseCpSpec(%q) = %+v, %v; want error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseCpSpec(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}
