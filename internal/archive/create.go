package archive

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// WriteOptions tune Write.
type WriteOptions struct {
	// Skip, if set, is asked about every path below the source (absolute
	// when src is); a directory it skips is not descended into.
	Skip func(path string) bool
}

// Write streams src as a tar to w. For a directory the entries are its
// contents, named relative to it; for a file, one entry named by its base
// name. A symlink src is followed; symlinks below it are stored as links,
// never followed. Regular files, directories and symlinks are written;
// sockets, devices and fifos are skipped. Files linked more than once are
// stored once and then as hard links. A file that shrinks while it is
// read is padded with zeros, one that grows is cut at its size when
// opened: the stream stays a valid tar either way.
func Write(ctx context.Context, w io.Writer, src string, opts WriteOptions) (Result, error) {
	src = filepath.Clean(src)
	fi, err := os.Stat(src)
	if err != nil {
		return Result{}, classify("archive "+src, err)
	}
	aw := &writer{tw: tar.NewWriter(w), links: map[fileID]string{}, buf: make([]byte, 256<<10)}
	if !fi.IsDir() {
		if !fi.Mode().IsRegular() {
			return Result{}, invalid("archive %s: not a regular file or directory", src)
		}
		var real string
		if real, err = filepath.EvalSymlinks(src); err != nil {
			return Result{}, classify("archive "+src, err)
		}
		err = aw.file(real, filepath.Base(src))
	} else {
		err = aw.walk(ctx, src, "", opts)
	}
	if err != nil {
		return aw.res, err
	}
	if err := aw.tw.Close(); err != nil {
		return aw.res, err
	}
	return aw.res, nil
}

type fileID struct{ dev, ino uint64 }

type writer struct {
	tw    *tar.Writer
	links map[fileID]string
	buf   []byte
	res   Result
}

// walk adds the contents of dir (rel names it in the archive), in name
// order.
func (aw *writer) walk(ctx context.Context, dir, rel string, opts WriteOptions) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if rel != "" && errors.Is(err, fs.ErrNotExist) {
			return nil // removed while we were reading
		}
		return classify("archive "+dir, err)
	}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := filepath.Join(dir, e.Name())
		if opts.Skip != nil && opts.Skip(p) {
			continue
		}
		name := filepath.ToSlash(filepath.Join(rel, e.Name()))
		if err := aw.add(p, name); err != nil {
			return err
		}
		if e.IsDir() {
			if err := aw.walk(ctx, p, name, opts); err != nil {
				return err
			}
		}
	}
	return nil
}

// add writes the entry for p under name. Entries that vanished or are
// not regular files, directories or symlinks are skipped.
func (aw *writer) add(p, name string) error {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return classify("archive "+p, err)
	}
	switch {
	case fi.Mode().IsRegular():
		return aw.file(p, name)
	case fi.IsDir():
		return aw.header(fi, name+"/", "")
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return nil // replaced while we were reading
		}
		return aw.header(fi, name, target)
	}
	return nil
}

func (aw *writer) header(fi fs.FileInfo, name, link string) error {
	hdr, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return fmt.Errorf("archive %s: %w", name, err)
	}
	hdr.Name = name
	if err := aw.tw.WriteHeader(hdr); err != nil {
		return err
	}
	aw.res.Entries++
	return nil
}

func (aw *writer) file(p, name string) error {
	// O_NONBLOCK: if p was swapped for a fifo it must not block us.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) {
			return nil // replaced while we were reading
		}
		return classify("archive "+p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return classify("archive "+p, err)
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		id := fileID{uint64(st.Dev), st.Ino}
		if first, ok := aw.links[id]; ok {
			hdr, err := tar.FileInfoHeader(fi, "")
			if err != nil {
				return fmt.Errorf("archive %s: %w", name, err)
			}
			hdr.Name, hdr.Typeflag, hdr.Linkname, hdr.Size = name, tar.TypeLink, first, 0
			if err := aw.tw.WriteHeader(hdr); err != nil {
				return err
			}
			aw.res.Entries++
			return nil
		}
		aw.links[id] = name
	}
	if err := aw.header(fi, name, ""); err != nil {
		return err
	}
	n, err := io.CopyBuffer(aw.tw, io.LimitReader(f, fi.Size()), aw.buf)
	aw.res.Bytes += n
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Path == p {
			return classify("archive "+p, err)
		}
		return err
	}
	if short := fi.Size() - n; short > 0 {
		// The file shrank: keep the stream valid.
		if _, err := io.CopyN(aw.tw, zeros{}, short); err != nil {
			return err
		}
		aw.res.Bytes += short
	}
	return nil
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
