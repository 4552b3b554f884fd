package archive

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// maxLinkHops bounds symlink resolution, as the kernel's ELOOP does.
const maxLinkHops = 40

// checkSymlinks resolves every symlink of the archive against the
// finished tree. Each target was checked lexically when it was created,
// but a chain can still escape: with q -> "." a link p -> "q/.." names
// the parent of the tree.
func (x *extractor) checkSymlinks() error {
	for _, name := range x.symlinks {
		fi, err := x.root.Lstat(name)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			continue // replaced by a later entry
		}
		if err := resolveInside(x.root, name); err != nil {
			return err
		}
	}
	return nil
}

// resolveInside follows the symlink name, and every symlink its target
// passes through, and fails if the walk leaves the root. Missing
// components are taken lexically.
func resolveInside(root *os.Root, name string) error {
	target, err := root.Readlink(name)
	if err != nil {
		return classify("entry "+name, err)
	}
	dir := splitPath(filepath.Dir(name))
	rest := splitPath(target)
	if filepath.IsAbs(target) {
		return invalid("entry %q: symlink target %q is absolute", name, target)
	}
	for hops := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		if c == ".." {
			if len(dir) == 0 {
				return invalid("entry %q: symlink %q resolves outside the target directory", name, target)
			}
			dir = dir[:len(dir)-1]
			continue
		}
		p := path.Join(append(slices.Clone(dir), c)...)
		fi, err := root.Lstat(p)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			dir = append(dir, c)
			continue
		}
		if hops++; hops > maxLinkHops {
			return invalid("entry %q: too many levels of symbolic links", name)
		}
		t, err := root.Readlink(p)
		if err != nil {
			return classify("entry "+name, err)
		}
		if filepath.IsAbs(t) {
			return invalid("entry %q: symlink %q resolves outside the target directory", name, target)
		}
		rest = append(splitPath(t), rest...)
	}
	return nil
}

// splitPath splits a relative path into its components, dropping empty
// ones and ".".
func splitPath(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// precheck compares the staged tree with the target before anything
// moves, so a type clash (a directory against a non-directory) fails the
// extraction instead of leaving it half merged. It returns the staged
// directories that already exist in the target and are merged into.
func precheck(root *os.Root, stage string) (map[string]bool, error) {
	existing := map[string]bool{}
	err := fs.WalkDir(root.FS(), stage, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return classify("extract", err)
		}
		if p == stage {
			return nil
		}
		rel := strings.TrimPrefix(p, stage+"/")
		fi, err := root.Lstat(rel)
		if errors.Is(err, fs.ErrNotExist) {
			if d.IsDir() {
				return fs.SkipDir // moved as a whole
			}
			return nil
		}
		if err != nil {
			return classify("extract "+rel, err)
		}
		switch {
		case d.IsDir() && fi.IsDir():
			existing[rel] = true
			return nil
		case d.IsDir():
			return conflict("extract %s: would replace a %s with a directory", rel, kind(fi.Mode()))
		case fi.IsDir():
			return conflict("extract %s: would replace a directory with a %s", rel, kind(d.Type()))
		}
		return nil
	})
	return existing, err
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m.IsDir():
		return "directory"
	case m.IsRegular():
		return "file"
	}
	return "special file"
}

// merge moves the staged entries of dir into the target: new entries and
// non-directories by rename (replacing what was there), directories that
// already exist by merging their contents.
func merge(root *os.Root, stage, dir string, existing map[string]bool) error {
	ents, err := fs.ReadDir(root.FS(), path.Join(stage, dir))
	if err != nil {
		return classify("extract", err)
	}
	for _, e := range ents {
		rel := path.Join(dir, e.Name())
		if existing[rel] {
			if err := merge(root, stage, rel, existing); err != nil {
				return err
			}
			continue
		}
		if err := root.Rename(path.Join(stage, rel), rel); err != nil {
			return classify("extract "+rel, err)
		}
	}
	return nil
}

// applyDirMeta gives the directories the archive created their modes and
// times, deepest first so setting a parent's time is the last change to
// it. Directories that existed before are left alone.
func (x *extractor) applyDirMeta(root *os.Root, existing map[string]bool) error {
	names := make([]string, 0, len(x.dirs))
	for n := range x.dirs {
		if !existing[n] {
			names = append(names, n)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		return strings.Count(b, "/") - strings.Count(a, "/")
	})
	for _, n := range names {
		m := x.dirs[n]
		if err := chmodDir(root, n, m.mode); err != nil {
			return classify("extract "+n, err)
		}
		if !m.mtime.IsZero() {
			root.Chtimes(n, m.mtime, m.mtime)
		}
	}
	return nil
}

// chmodDir sets a directory's mode through an open descriptor (fchmod):
// Root.Chmod needs fchmodat2 or /proc tricks that not every kernel (or
// gVisor) supports.
func chmodDir(root *os.Root, name string, mode os.FileMode) error {
	f, err := root.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return nil // replaced since; not ours to change
	}
	return f.Chmod(mode)
}
