// Package archive writes directory trees as tar streams and extracts tar
// streams into a directory without ever touching anything outside it.
//
// Extraction is staged: entries are written into a fresh hidden directory
// inside the target, through an os.Root on that directory, and moved into
// place only once the whole archive has been read and checked. A refused
// or failed extraction removes the staging directory and leaves the target
// as it was (missing target directories it created are removed too).
package archive

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Defaults of ExtractOptions.
const (
	DefaultMaxEntries = 100_000
	DefaultMaxBytes   = 10 << 30
)

// maxTrailing bounds what may follow the end-of-archive marker: tar pads
// its output to a record (10 KiB by default), not more.
const maxTrailing = 1 << 20

// stagePrefix names the staging directory inside the target.
const stagePrefix = ".airlock-untar-"

// ExtractOptions bound an extraction. Zero fields take the defaults.
type ExtractOptions struct {
	// MaxEntries caps the number of archive entries (every header counts).
	MaxEntries int64
	// MaxBytes caps the total size of the regular files' contents.
	MaxBytes int64
	// Owner, when set, owns every file, directory and link created. The
	// archive's own uid and gid are ignored either way.
	Owner *Owner
}

// Owner is a numeric user and group.
type Owner struct{ UID, GID int }

// Result counts what an archive held: entries (every header) and bytes
// of regular file contents.
type Result struct {
	Entries int64
	Bytes   int64
}

func (o ExtractOptions) withDefaults() ExtractOptions {
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	return o
}

// Extract reads a tar stream from r into dir, creating dir and its missing
// parents. Entries replace files of the same name and merge into existing
// directories. It refuses (errdefs.ErrInvalidArgument) absolute names,
// names with "..", links that resolve outside dir, devices and fifos; and
// (errdefs.ErrResourceExhausted) archives over the entry or byte caps.
// Existing directories keep their mode and owner; setuid and setgid bits
// are dropped. On error nothing of the archive is left in dir.
func Extract(ctx context.Context, r io.Reader, dir string, opts ExtractOptions) (res Result, err error) {
	opts = opts.withDefaults()
	made, err := mkdirAll(dir, opts.Owner)
	if err != nil {
		return Result{}, err
	}
	defer func() {
		if err != nil {
			removeMade(made)
		}
	}()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Result{}, classify("open "+dir, err)
	}
	defer root.Close()
	stage, err := makeStage(root)
	if err != nil {
		return Result{}, classify("extract into "+dir, err)
	}
	defer root.RemoveAll(stage)
	sr, err := root.OpenRoot(stage)
	if err != nil {
		return Result{}, classify("extract into "+dir, err)
	}
	defer sr.Close()

	x := &extractor{root: sr, opts: opts, dirs: map[string]dirMeta{}, buf: make([]byte, 256<<10)}
	if err := x.readAll(ctx, r); err != nil {
		return Result{}, err
	}
	if err := x.checkSymlinks(); err != nil {
		return Result{}, err
	}
	existing, err := precheck(root, stage)
	if err != nil {
		return Result{}, err
	}
	if err := merge(root, stage, ".", existing); err != nil {
		return Result{}, err
	}
	if err := x.applyDirMeta(root, existing); err != nil {
		return Result{}, err
	}
	return Result{Entries: x.entries, Bytes: x.bytes}, nil
}

// mkdirAll creates dir and its missing parents, returning those it made,
// outermost first.
func mkdirAll(dir string, owner *Owner) ([]string, error) {
	dir = filepath.Clean(dir)
	var missing []string
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err == nil {
			if !fi.IsDir() {
				return nil, invalid("extract into %s: %s is not a directory", dir, p)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, classify("extract into "+dir, err)
		}
		missing = append(missing, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	var made []string
	for i := len(missing) - 1; i >= 0; i-- {
		err := os.Mkdir(missing[i], 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue // created concurrently
		}
		if err == nil && owner != nil {
			err = os.Lchown(missing[i], owner.UID, owner.GID)
		}
		if err != nil {
			removeMade(made)
			return nil, classify("extract into "+dir, err)
		}
		made = append(made, missing[i])
	}
	return made, nil
}

// removeMade removes the directories mkdirAll made, innermost first, as
// long as they are empty.
func removeMade(made []string) {
	for i := len(made) - 1; i >= 0; i-- {
		os.Remove(made[i])
	}
}

// makeStage creates the staging directory: private (0700), so processes
// in the sandbox cannot see or tamper with a half-extracted tree.
func makeStage(root *os.Root) (string, error) {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	name := stagePrefix + hex.EncodeToString(rnd[:])
	return name, root.Mkdir(name, 0o700)
}

// readAll extracts every entry of the stream into the staging root, then
// checks that nothing but padding follows the archive.
func (x *extractor) readAll(ctx context.Context, r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return readError(err)
		}
		x.entries++
		if x.entries > x.opts.MaxEntries {
			return exhausted("archive has more than %d entries (the entry cap)", x.opts.MaxEntries)
		}
		if err := x.entry(tr, hdr); err != nil {
			return err
		}
	}
	n, err := io.Copy(io.Discard, io.LimitReader(r, maxTrailing+1))
	if err != nil {
		return readError(err)
	}
	if n > maxTrailing {
		return invalid("more than %d bytes of data after the end of the archive", maxTrailing)
	}
	return nil
}

// readError classifies a failure to read the stream: a malformed or
// truncated archive is the sender's mistake.
func readError(err error) error {
	switch {
	case errors.Is(err, tar.ErrHeader), errors.Is(err, tar.ErrFieldTooLong), errors.Is(err, tar.ErrInsecurePath):
		return invalid("not a valid tar archive: %v", err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("truncated tar archive: %v", err)
	}
	return err
}
