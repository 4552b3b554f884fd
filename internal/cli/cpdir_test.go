package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCopyDirTargets(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"dir", false}, {"dir/", false}, {"dir/.", true}, {".", true}, {"/", true}, {"/a/b/.", true}, {"/a/b", false},
	} {
		if got := contentsOnly(tc.in); got != tc.want {
			t.Errorf("contentsOnly(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	for _, tc := range []struct {
		dst      string
		contents bool
		want     string
		err      string
	}{
		{dst: dir, want: filepath.Join(dir, "proj")},
		{dst: dir, contents: true, want: dir},
		{dst: filepath.Join(dir, "new"), want: filepath.Join(dir, "new")},
		{dst: file, err: "not a directory"},
	} {
		got, err := localTarget(tc.dst, "proj", tc.contents)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("localTarget(%q) = %q, %v; want error %q", tc.dst, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("localTarget(%q, %v) = %q, %v; want %q", tc.dst, tc.contents, got, err, tc.want)
		}
	}
}
