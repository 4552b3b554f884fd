// Package mountinfo reads the calling process's mount table and removes
// mounts below a directory, so that deleting a tree can never descend into
// a filesystem still mounted inside it.
package mountinfo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// Under lists the mount points at or below dir, deepest first.
func Under(dir string) ([]string, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		real = filepath.Clean(dir)
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	return parse(string(data), real), nil
}

// IsMountPoint reports whether path itself is a mount point.
func IsMountPoint(path string) (bool, error) {
	mps, err := Under(path)
	if err != nil {
		return false, err
	}
	for _, mp := range mps {
		if mp == filepath.Clean(path) {
			return true, nil
		}
	}
	return false, nil
}

// UnmountAll detaches every mount at or below dir, including mounts
// stacked on one point, and fails if any remains.
func UnmountAll(dir string) error {
	// Stacked mounts need one unmount each; bound the loop.
	for range 16 {
		mps, err := Under(dir)
		if err != nil {
			return err
		}
		if len(mps) == 0 {
			return nil
		}
		for _, mp := range mps {
			if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil &&
				!errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				return fmt.Errorf("unmount %s: %w", mp, err)
			}
		}
	}
	mps, err := Under(dir)
	if err != nil {
		return err
	}
	if len(mps) > 0 {
		return fmt.Errorf("%s still has mounts (%s)", dir, strings.Join(mps, ", "))
	}
	return nil
}

func parse(mountinfo, dir string) []string {
	var out []string
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescape(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// unescape decodes the \ooo octal escapes the kernel uses for space, tab,
// newline and backslash in mountinfo.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
