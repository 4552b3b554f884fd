package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
)

const (
	maxListDepth = 10
	// maxListEntries stops a deep listing early: its reply could not fit
	// in a frame anyway, and walking all of / costs the sandbox dearly.
	maxListEntries = 20000
)

// fileOp runs the single request/reply file operations.
func (a *Agent) fileOp(req agentproto.Request) (agentproto.Reply, error) {
	p, err := absPath(req.Op, req.Path)
	if err != nil {
		return agentproto.Reply{}, err
	}
	switch req.Op {
	case agentproto.OpStat:
		fi, err := os.Lstat(p)
		if err != nil {
			return agentproto.Reply{}, pathError("stat", p, err)
		}
		info := fileInfo(p, fi)
		return agentproto.Reply{Info: &info}, nil
	case agentproto.OpList:
		files, err := list(p, req.Depth)
		return agentproto.Reply{Files: files}, err
	case agentproto.OpMkdir:
		return agentproto.Reply{}, a.mkdir(p, req)
	case agentproto.OpRemove:
		return agentproto.Reply{}, remove(p, req.Recursive)
	case agentproto.OpRename:
		return agentproto.Reply{}, rename(p, req.To)
	}
	return agentproto.Reply{}, fmt.Errorf("unknown op %q: %w", req.Op, errdefs.ErrInvalidArgument)
}

// list returns what is under root, depth levels deep, sorted by path.
// Symlinks are listed but never followed; root itself may be one.
func list(root string, depth int) ([]api.FileInfo, error) {
	switch {
	case depth < 0:
		return nil, fmt.Errorf("list %s: negative depth %d: %w", root, depth, errdefs.ErrInvalidArgument)
	case depth == 0:
		depth = 1
	case depth > maxListDepth:
		depth = maxListDepth
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, pathError("list", root, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("list %s: not a directory: %w", root, errdefs.ErrInvalidArgument)
	}
	files := []api.FileInfo{}
	var walk func(dir string, level int) error
	walk = func(dir string, level int) error {
		ents, err := os.ReadDir(dir)
		if err != nil {
			if level == 1 {
				return pathError("list", root, err)
			}
			return nil // a subdirectory that vanished or cannot be read
		}
		for _, e := range ents {
			if len(files) >= maxListEntries {
				return fmt.Errorf("list %s: more than %d entries, use a smaller depth: %w",
					root, maxListEntries, errdefs.ErrResourceExhausted)
			}
			p := filepath.Join(dir, e.Name())
			fi, err := os.Lstat(p)
			if err != nil {
				continue // removed while we were listing
			}
			files = append(files, fileInfo(p, fi))
			if fi.IsDir() && level < depth {
				if err := walk(p, level+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(root, 1); err != nil {
		return nil, err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, nil
}

// mkdir creates a directory owned by the request's user. With parents it
// behaves like mkdir -p: missing ancestors are created too, and an existing
// directory is fine.
func (a *Agent) mkdir(p string, req agentproto.Request) error {
	acct, err := a.account(req.User)
	if err != nil {
		return err
	}
	perm := os.FileMode(req.Mode & 0o777)
	if perm == 0 {
		perm = 0o755
	}
	if req.Parents {
		if fi, err := os.Lstat(p); err == nil && !fi.IsDir() {
			return pathError("mkdir", p, syscall.EEXIST)
		}
		if err := mkdirAllOwned(p, perm, acct); err != nil {
			return pathError("mkdir", p, err)
		}
		return nil
	}
	if err := mkdirOwned(p, perm, acct); err != nil {
		return pathError("mkdir", p, err)
	}
	return nil
}

// mkdirAllOwned creates dir and its missing ancestors, each owned by acct.
// Existing directories are left as they are.
func mkdirAllOwned(dir string, perm os.FileMode, acct *account) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if fi.IsDir() {
			return nil
		}
		return syscall.ENOTDIR
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirAllOwned(parent, perm, acct); err != nil {
			return err
		}
	}
	err = mkdirOwned(dir, perm, acct)
	if errors.Is(err, fs.ErrExist) {
		if fi, serr := os.Stat(dir); serr == nil && fi.IsDir() {
			return nil // created concurrently
		}
	}
	return err
}

func mkdirOwned(dir string, perm os.FileMode, acct *account) error {
	if err := os.Mkdir(dir, perm); err != nil {
		return err
	}
	// Explicit chmod: Mkdir's mode went through the umask.
	if err := os.Chmod(dir, perm); err != nil {
		return err
	}
	return acct.chown(dir)
}

// remove deletes p; a non-empty directory needs recursive.
func remove(p string, recursive bool) error {
	if p == "/" {
		return fmt.Errorf("remove /: refusing to remove the root directory: %w", errdefs.ErrInvalidArgument)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return pathError("remove", p, err)
	}
	if fi.IsDir() && recursive {
		err = os.RemoveAll(p)
	} else {
		err = os.Remove(p)
	}
	if err != nil {
		// ENOTEMPTY maps to conflict: "remove /x: directory not empty".
		return pathError("remove", p, err)
	}
	return nil
}

// rename moves from to to, replacing a file or empty directory at to.
func rename(from, to string) error {
	to, err := absPath("rename", to)
	if err != nil {
		return err
	}
	if from == "/" || to == "/" {
		return fmt.Errorf("rename %s to %s: cannot move the root directory: %w", from, to, errdefs.ErrInvalidArgument)
	}
	if err := os.Rename(from, to); err != nil {
		return pathError("rename", from+" to "+to, err)
	}
	return nil
}

// fileInfo describes p. Mode carries the unix permission bits including
// setuid, setgid and sticky (mode & 0o7777); the file type is in Type.
func fileInfo(p string, fi fs.FileInfo) api.FileInfo {
	info := api.FileInfo{
		Name:    filepath.Base(p),
		Path:    p,
		Size:    fi.Size(),
		Mode:    uint32(fi.Mode().Perm()),
		ModTime: fi.ModTime().UTC(),
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		info.Mode = st.Mode & 0o7777
		info.UID = int(st.Uid)
		info.GID = int(st.Gid)
	}
	switch {
	case fi.Mode().IsRegular():
		info.Type = "file"
	case fi.IsDir():
		info.Type = "dir"
	case fi.Mode()&fs.ModeSymlink != 0:
		info.Type = "symlink"
		info.LinkTarget, _ = os.Readlink(p)
	default:
		info.Type = "other"
	}
	return info
}
