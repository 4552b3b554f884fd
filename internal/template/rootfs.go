package template

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// finalize applies the settings every template shares: agent user, /tmp,
// the /.airlock mount point and neutral host/network files.
func finalize(rootfs string, uid int, shell string) error {
	tmp := filepath.Join(rootfs, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o777|fs.ModeSticky); err != nil {
		return err
	}
	mnt := filepath.Join(rootfs, ".airlock")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return err
	}
	if err := os.Lchown(mnt, 0, 0); err != nil {
		return err
	}
	if err := os.Chmod(mnt, 0o755); err != nil {
		return err
	}
	files := map[string]string{
		"etc/hostname": "sandbox\n",
		"etc/hosts": "127.0.0.1\tlocalhost\n127.0.1.1\tsandbox\n" +
			"::1\tlocalhost ip6-localhost ip6-loopback\nff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n",
		// The daemon decides networking; debootstrap copies the host's file.
		"etc/resolv.conf": "",
	}
	for rel, content := range files {
		if err := rewriteFile(filepath.Join(rootfs, rel), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return addUser(rootfs, "user", uid, shell)
}

func addUser(rootfs, name string, uid int, shell string) error {
	home := "/home/" + name
	day := time.Now().Unix() / 86400
	entries := []struct {
		file, line string
		required   bool
	}{
		{"etc/passwd", fmt.Sprintf("%s:x:%d:%d:%s:%s:%s", name, uid, uid, name, home, shell), true},
		{"etc/group", fmt.Sprintf("%s:x:%d:", name, uid), true},
		{"etc/shadow", fmt.Sprintf("%s:!:%d:0:99999:7:::", name, day), false},
		{"etc/gshadow", fmt.Sprintf("%s:!::", name), false},
	}
	for _, e := range entries {
		p := filepath.Join(rootfs, e.file)
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) && !e.required {
			continue
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		for _, l := range strings.Split(string(data), "\n") {
			f := strings.Split(l, ":")
			if f[0] == name {
				return fmt.Errorf("%s: %q already exists", e.file, name)
			}
			if len(f) > 2 && (e.file == "etc/passwd" || e.file == "etc/group") && f[2] == fmt.Sprint(uid) {
				return fmt.Errorf("%s: id %d already used by %q", e.file, uid, f[0])
			}
		}
		if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
			data = append(data, '\n')
		}
		if err := rewriteFile(p, append(data, e.line+"\n"...), 0); err != nil {
			return err
		}
	}

	h := filepath.Join(rootfs, home)
	if err := os.MkdirAll(h, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(h, 0o755); err != nil {
		return err
	}
	if err := os.Lchown(h, uid, uid); err != nil {
		return err
	}
	skel, _ := os.ReadDir(filepath.Join(rootfs, "etc/skel"))
	for _, e := range skel {
		if !e.Type().IsRegular() {
			continue
		}
		dst := filepath.Join(h, e.Name())
		if err := copyFile(filepath.Join(rootfs, "etc/skel", e.Name()), dst, 0o644); err != nil {
			return err
		}
		if err := os.Lchown(dst, uid, uid); err != nil {
			return err
		}
	}
	return nil
}

// rewriteFile replaces path without following a symlink there (an absolute
// link would point into the host). A zero mode keeps the existing file's
// mode and owner; otherwise the file becomes root-owned with that mode,
// since debootstrap copies some /etc files from the host verbatim.
func rewriteFile(path string, data []byte, mode fs.FileMode) error {
	uid, gid := 0, 0
	fi, err := os.Lstat(path)
	if err == nil {
		if mode == 0 && fi.Mode().IsRegular() {
			mode = fi.Mode().Perm()
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				uid, gid = int(st.Uid), int(st.Gid)
			}
		}
		if err := os.Remove(path); err != nil {
			return err
		}
	}
	if mode == 0 {
		mode = 0o644
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chown(uid, gid); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func copyFile(src, dst string, mode fs.FileMode) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.WriteFile(dst, data, mode); err != nil {
		return err
	}
	return os.Chmod(dst, mode)
}
