package template

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"github.com/airlockdev/airlock/internal/reaper"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func buildBusybox(ctx context.Context, b *buildEnv) ([]string, error) {
	if len(b.opts.ExtraPackages) > 0 {
		return nil, errors.New("busybox recipe does not support extra packages")
	}
	src, err := findStaticBusybox()
	if err != nil {
		return nil, err
	}
	b.out.Printf("copying %s", src)
	for _, d := range []string{"bin", "sbin", "usr/bin", "usr/sbin", "etc", "dev", "proc", "sys", "run", "var/tmp", "home"} {
		if err := os.MkdirAll(filepath.Join(b.rootfs, d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.Mkdir(filepath.Join(b.rootfs, "root"), 0o700); err != nil {
		return nil, err
	}
	bb := filepath.Join(b.rootfs, "bin", "busybox")
	if err := copyFile(src, bb, 0o755); err != nil {
		return nil, err
	}

	b.out.Printf("installing applets")
	list, err := reaper.Output(exec.CommandContext(ctx, bb, "--list-full"))
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("busybox --list-full: %w", err)
	}
	n := 0
	for _, rel := range strings.Fields(string(list)) {
		rel = filepath.Clean(rel)
		if filepath.IsAbs(rel) || strings.HasPrefix(rel, "..") || rel == "bin/busybox" {
			continue
		}
		dst := filepath.Join(b.rootfs, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return nil, err
		}
		// Relative targets keep the links valid when inspected from the host.
		target, err := filepath.Rel(filepath.Dir(rel), "bin/busybox")
		if err != nil {
			return nil, err
		}
		if err := os.Symlink(target, dst); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, errors.New("busybox --list-full returned no applets")
	}
	b.out.Printf("installed %d applets", n)

	files := map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
		"etc/group":  "root:x:0:\nnogroup:x:65534:\n",
	}
	for rel, content := range files {
		if err := os.WriteFile(filepath.Join(b.rootfs, rel), []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// findStaticBusybox returns the host's busybox if it is statically linked;
// a dynamic one would not run inside a rootfs without its libraries.
func findStaticBusybox() (string, error) {
	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		static := true
		for _, prog := range f.Progs {
			if prog.Type == elf.PT_INTERP {
				static = false
			}
		}
		f.Close()
		if !static {
			return "", fmt.Errorf("%s is dynamically linked; install busybox-static", p)
		}
		return p, nil
	}
	return "", errors.New("busybox not found; install busybox-static")
}
