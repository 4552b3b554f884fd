package archive

import (
	"archive/tar"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// extractor writes entries into the staging root.
type extractor struct {
	root     *os.Root
	opts     ExtractOptions
	entries  int64
	bytes    int64
	dirs     map[string]dirMeta // every directory created, by name
	symlinks []string
	buf      []byte
}

// dirMeta is applied to a directory once everything is in place: a
// read-only directory must not stop its own entries from being written.
type dirMeta struct {
	mode  os.FileMode
	mtime time.Time // zero for directories the archive did not list
}

// entryName validates an archive name and returns it cleaned, or "" for
// the archive's root ("." or "./").
func entryName(name string) (string, error) {
	if name == "" {
		return "", invalid("entry with an empty name")
	}
	if strings.IndexByte(name, 0) >= 0 {
		return "", invalid("entry %q: name contains NUL", name)
	}
	if filepath.IsAbs(name) {
		return "", invalid("entry %q: absolute names are not allowed", name)
	}
	for _, c := range strings.Split(name, "/") {
		if c == ".." {
			return "", invalid("entry %q: names with '..' are not allowed", name)
		}
	}
	clean := filepath.Clean(name)
	if clean == "." {
		return "", nil
	}
	if !filepath.IsLocal(clean) {
		return "", invalid("entry %q: name leaves the target directory", name)
	}
	return clean, nil
}

// permBits keeps the permission and sticky bits of a tar mode; setuid and
// setgid are dropped so an archive cannot plant privileged programs.
func permBits(mode int64) os.FileMode {
	m := os.FileMode(mode) & os.ModePerm
	if mode&0o1000 != 0 {
		m |= os.ModeSticky
	}
	return m
}

func (x *extractor) entry(tr *tar.Reader, hdr *tar.Header) error {
	name, err := entryName(hdr.Name)
	if err != nil {
		return err
	}
	if name == "" {
		if hdr.Typeflag == tar.TypeDir {
			return nil // the target itself: keep its mode and owner
		}
		return invalid("entry %q: only a directory may name the archive's root", hdr.Name)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return x.dir(name, hdr)
	case tar.TypeReg, '\x00', tar.TypeGNUSparse: // '\x00' is the pre-POSIX regular file
		return x.file(tr, name, hdr)
	case tar.TypeSymlink:
		return x.symlink(name, hdr.Linkname)
	case tar.TypeLink:
		return x.hardlink(name, hdr.Linkname)
	case tar.TypeXGlobalHeader:
		return nil
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		return invalid("entry %q: device and fifo entries are not allowed", hdr.Name)
	}
	return invalid("entry %q: unsupported entry type %q", hdr.Name, hdr.Typeflag)
}

// parents creates the missing directories above name.
func (x *extractor) parents(name string) error {
	dir := filepath.Dir(name)
	if dir == "." {
		return nil
	}
	if _, ok := x.dirs[dir]; ok {
		return nil
	}
	if err := x.parents(dir); err != nil {
		return err
	}
	_, err := x.root.Lstat(dir)
	if err == nil {
		// Reached through a symlink of the archive, which Root follows
		// inside the tree only.
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return classify("entry "+name, err)
	}
	if err := x.root.Mkdir(dir, 0o700); err != nil {
		return classify("entry "+name, err)
	}
	x.dirs[dir] = dirMeta{mode: 0o755}
	return x.chown(dir)
}

func (x *extractor) chown(name string) error {
	if x.opts.Owner == nil {
		return nil
	}
	if err := x.root.Lchown(name, x.opts.Owner.UID, x.opts.Owner.GID); err != nil {
		return classify("entry "+name, err)
	}
	return nil
}

// replace removes an earlier entry of the same name; later entries win,
// as with tar, except that a directory is never replaced.
func (x *extractor) replace(name string) error {
	fi, err := x.root.Lstat(name)
	if err != nil {
		return classify("entry "+name, err)
	}
	if fi.IsDir() {
		return conflict("entry %q: a directory of that name is already in the archive", name)
	}
	if err := x.root.Remove(name); err != nil {
		return classify("entry "+name, err)
	}
	return nil
}

func (x *extractor) dir(name string, hdr *tar.Header) error {
	if err := x.parents(name); err != nil {
		return err
	}
	err := x.root.Mkdir(name, 0o700)
	if errors.Is(err, fs.ErrExist) {
		if fi, serr := x.root.Lstat(name); serr == nil && !fi.IsDir() {
			if err := x.root.Remove(name); err != nil {
				return classify("entry "+name, err)
			}
			err = x.root.Mkdir(name, 0o700)
		} else {
			err = nil // listed twice, or made as a parent of an earlier entry
		}
	}
	if err != nil {
		return classify("entry "+name, err)
	}
	x.dirs[name] = dirMeta{mode: permBits(hdr.Mode), mtime: hdr.ModTime}
	return x.chown(name)
}

func (x *extractor) file(tr io.Reader, name string, hdr *tar.Header) error {
	if hdr.Size < 0 {
		return invalid("entry %q: negative size", hdr.Name)
	}
	if hdr.Size > x.opts.MaxBytes-x.bytes {
		return exhausted("archive holds more than %d bytes of file contents (max_bytes)", x.opts.MaxBytes)
	}
	if err := x.parents(name); err != nil {
		return err
	}
	const flags = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	f, err := x.root.OpenFile(name, flags, 0o600)
	if errors.Is(err, fs.ErrExist) {
		if err := x.replace(name); err != nil {
			return err
		}
		f, err = x.root.OpenFile(name, flags, 0o600)
	}
	if err != nil {
		return classify("entry "+name, err)
	}
	defer f.Close()
	n, err := io.CopyBuffer(onlyWriter{f}, tr, x.buf)
	x.bytes += n
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return invalid("entry %q: truncated tar archive", hdr.Name)
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return classify("entry "+name, err) // the write failed (disk full)
		}
		return err // the stream failed
	}
	if err := f.Chmod(permBits(hdr.Mode)); err != nil {
		return classify("entry "+name, err)
	}
	if x.opts.Owner != nil {
		if err := f.Chown(x.opts.Owner.UID, x.opts.Owner.GID); err != nil {
			return classify("entry "+name, err)
		}
	}
	if err := f.Close(); err != nil {
		return classify("entry "+name, err)
	}
	if !hdr.ModTime.IsZero() {
		x.root.Chtimes(name, hdr.ModTime, hdr.ModTime)
	}
	return nil
}

// onlyWriter hides os.File's ReadFrom, which would bypass the copy buffer
// for a plain reader anyway.
type onlyWriter struct{ w io.Writer }

func (o onlyWriter) Write(p []byte) (int, error) { return o.w.Write(p) }

func (x *extractor) symlink(name, target string) error {
	if target == "" {
		return invalid("entry %q: symlink with an empty target", name)
	}
	if filepath.IsAbs(target) {
		return invalid("entry %q: symlink target %q is absolute; only relative links inside the target directory are allowed", name, target)
	}
	if !filepath.IsLocal(filepath.Join(filepath.Dir(name), target)) {
		return invalid("entry %q: symlink target %q points outside the target directory", name, target)
	}
	if err := x.parents(name); err != nil {
		return err
	}
	err := x.root.Symlink(target, name)
	if errors.Is(err, fs.ErrExist) {
		if err := x.replace(name); err != nil {
			return err
		}
		err = x.root.Symlink(target, name)
	}
	if err != nil {
		return classify("entry "+name, err)
	}
	x.symlinks = append(x.symlinks, name)
	return x.chown(name)
}

// hardlink links name to an earlier regular file of the archive. The
// staging directory holds nothing else, so a hard link can never reach a
// file that was not part of the archive.
func (x *extractor) hardlink(name, target string) error {
	t, err := entryName(target)
	if err != nil || t == "" {
		return invalid("entry %q: hard link target %q is not an entry of the archive", name, target)
	}
	if t == name {
		return nil
	}
	fi, err := x.root.Lstat(t)
	if err != nil {
		return invalid("entry %q: hard link target %q is not an earlier entry of the archive", name, target)
	}
	if !fi.Mode().IsRegular() {
		return invalid("entry %q: hard link target %q is not a regular file", name, target)
	}
	if err := x.parents(name); err != nil {
		return err
	}
	err = x.root.Link(t, name)
	if errors.Is(err, fs.ErrExist) {
		if err := x.replace(name); err != nil {
			return err
		}
		err = x.root.Link(t, name)
	}
	if err != nil {
		return classify("entry "+name, err)
	}
	return nil
}
