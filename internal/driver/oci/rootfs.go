package oci

import (
	"context"
	"errors"
	"fmt"
	"github.com/airlockdev/airlock/internal/mountinfo"
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
	if mounted, err := mountinfo.IsMountPoint(merged); err != nil {
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
	if mounted, err := mountinfo.IsMountPoint(mnt); err != nil || mounted {
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
