package oci

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/airlockdev/airlock/internal/reaper"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// mountOverlay mounts a copy-on-write root at merged: the template is the
// read-only lower layer and the sandbox's writes land in upper. Creating a
// sandbox never copies the template.
func mountOverlay(lower, upper, work, merged string) error {
	for _, d := range []string{upper, work, merged} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	if mounted, err := isMountPoint(merged); err != nil {
		return err
	} else if mounted {
		return nil // re-adopted after a restart
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work)
	// nosuid: with no_new_privs set-uid bits are ignored anyway; nosuid
	// says so at the mount too.
	if err := unix.Mount("overlay", merged, "overlay", unix.MS_NODEV|unix.MS_NOSUID, opts); err != nil {
		return fmt.Errorf("mount overlay at %s: %w", merged, err)
	}
	return nil
}

// mountDisk gives the sandbox a writable layer of its own of sizeMB: a
// sparse ext4 image on a loop device. Filling it fails inside the sandbox
// with ENOSPC instead of filling the host's disk. The image costs disk only
// for what is written; mkfs and mount take ~20 ms.
func mountDisk(ctx context.Context, image, mnt string, sizeMB int64) error {
	if err := os.MkdirAll(mnt, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", mnt, err)
	}
	if mounted, err := isMountPoint(mnt); err != nil || mounted {
		return err // mounted already: re-adopted after a restart
	}
	if _, err := os.Stat(image); errors.Is(err, os.ErrNotExist) {
		f, err := os.OpenFile(image, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return fmt.Errorf("create disk image: %w", err)
		}
		err = f.Truncate(sizeMB << 20)
		f.Close()
		if err != nil {
			return fmt.Errorf("size disk image: %w", err)
		}
		// No journal (the layer dies with the sandbox), no reserved blocks.
		if out, err := reaper.CombinedOutput(exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-O", "^has_journal",
			"-E", "lazy_itable_init=1,nodiscard", "-m", "0", image)); err != nil {
			return fmt.Errorf("mkfs.ext4: %w: %s", err, strings.TrimSpace(string(out)))
		}
	}
	// mount(8) sets up the loop device with autoclear, so unmounting frees it.
	if out, err := reaper.CombinedOutput(exec.CommandContext(ctx, "mount", "-o", "loop,nodev,nosuid", image, mnt)); err != nil {
		return fmt.Errorf("mount disk image: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// unmountAll unmounts every mount at or below dir, deepest first, so that
// removing dir can never descend into a mounted filesystem.
func unmountAll(dir string) error {
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	var errs []error
	for i := len(mounts) - 1; i >= 0; i-- {
		if err := unix.Unmount(mounts[i], unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", mounts[i], err))
		}
	}
	return errors.Join(errs...)
}

func isMountPoint(path string) (bool, error) {
	mounts, err := mountsUnder(path)
	if err != nil {
		return false, err
	}
	for _, m := range mounts {
		if m == path {
			return true, nil
		}
	}
	return false, nil
}

// mountsUnder lists mount points at or below dir in mount order.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escaping of space, tab, newline
// and backslash.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range s[i+1 : i+4] {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + byte(c-'0')
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// keepTmpOnRoot stops runsc from mounting its own tmpfs on /tmp, which it
// does only when /tmp is empty. This runsc resolves absolute symlinks
// wrongly inside any mount but the root (a link to /etc under /tmp lands on
// the mount's root), and tools put such links in /tmp all the time. With a
// file in it, /tmp stays on the sandbox's disk layer.
func keepTmpOnRoot(rootfs string) error {
	tmp := filepath.Join(rootfs, "tmp")
	if err := os.MkdirAll(tmp, 0o1777); err != nil {
		return fmt.Errorf("create /tmp: %w", err)
	}
	if err := os.Chmod(tmp, 0o1777|os.ModeSticky); err != nil {
		return fmt.Errorf("chmod /tmp: %w", err)
	}
	keep := filepath.Join(tmp, ".airlock-tmp-on-disk")
	if err := os.WriteFile(keep, nil, 0o444); err != nil {
		return fmt.Errorf("mark /tmp: %w", err)
	}
	return nil
}
