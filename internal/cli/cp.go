package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/airlockdev/airlock/client"
)

// cpSpec is one side of a copy: a local path ("-" for stdin or stdout)
// or ID:/path in a sandbox.
type cpSpec struct {
	ID   string // empty for a local path
	Path string
}

func (s cpSpec) remote() bool { return s.ID != "" }

// parseCpSpec parses ID:/path as a sandbox path; anything else is local.
// A local path with a colon can be written with a slash before it, such
// as ./a:b.
func parseCpSpec(arg string) (cpSpec, error) {
	if arg == "" {
		return cpSpec{}, errors.New("empty path")
	}
	id, p, ok := strings.Cut(arg, ":")
	if !ok || id == "" || strings.Contains(id, "/") {
		return cpSpec{Path: arg}, nil
	}
	if p == "" {
		return cpSpec{}, fmt.Errorf("%q: missing path after %q", arg, id+":")
	}
	if !path.IsAbs(p) {
		return cpSpec{}, fmt.Errorf("%q: sandbox path must be absolute, like %s:/%s", arg, id, p)
	}
	return cpSpec{ID: id, Path: p}, nil
}

func newCpCmd(a *app) *cobra.Command {
	var recursive bool
	cmd := &cobra.Command{
		Use:   "cp [-r] SRC DST",
		Short: "Copy a file or directory into or out of a sandbox",
		Long: "Copy a file between the local machine and a sandbox. Exactly one of SRC and DST is\n" +
			"ID:/path. A local '-' is stdin (as SRC) or stdout (as DST). Copying to a directory\n" +
			"keeps the source's file name.\n\n" +
			"With -r, directories are copied too (as a tar stream): into DST/NAME when DST is an\n" +
			"existing directory, else to DST itself; a SRC ending in /. copies its contents into DST.\n" +
			"Symlinks are copied as links. Extraction on either side refuses entries that would\n" +
			"land outside DST.",
		Example: "  airlock cp data.csv sb-123:/home/user/data.csv\n" +
			"  airlock cp sb-123:/home/user/out.png .\n" +
			"  airlock cp -r ./project sb-123:/home/user/\n" +
			"  airlock cp -r sb-123:/home/user/project/out ./results\n" +
			"  tar cz src | airlock cp - sb-123:/tmp/src.tgz\n" +
			"  airlock cp sb-123:/etc/os-release -",
		Args: argsUsage(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := parseCpSpec(args[0])
			if err != nil {
				return usageError{err}
			}
			dst, err := parseCpSpec(args[1])
			if err != nil {
				return usageError{err}
			}
			switch {
			case src.remote() && dst.remote():
				return usagef("copying between sandboxes is not supported; copy through a local file")
			case !src.remote() && !dst.remote():
				return usagef("one of SRC and DST must be a sandbox path, ID:/path")
			}
			if recursive {
				return copyDir(cmd, a, src, dst)
			}
			if dst.remote() {
				return upload(cmd, a, src.Path, dst)
			}
			return download(cmd, a, src, dst.Path)
		},
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "copy directories recursively")
	return cmd
}

// upload copies a local file (or stdin) into a sandbox, streaming it.
func upload(cmd *cobra.Command, a *app, local string, dst cpSpec) error {
	ctx := cmd.Context()
	sb, err := a.sandbox(ctx, dst.ID)
	if err != nil {
		return err
	}
	var (
		r    io.Reader
		mode os.FileMode
		name string
	)
	if local == "-" {
		r = cmd.InOrStdin()
	} else {
		f, err := os.Open(local)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return fmt.Errorf("%s is a directory (use -r to copy directories)", local)
		}
		r, mode, name = f, fi.Mode()&(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky), filepath.Base(local)
	}
	target := dst.Path
	isDir := strings.HasSuffix(target, "/")
	if !isDir {
		isDir, err = remoteIsDir(ctx, sb, target)
		if err != nil {
			return err
		}
	}
	if isDir {
		if name == "" {
			return fmt.Errorf("%s:%s is a directory; give a file name to copy stdin to", dst.ID, dst.Path)
		}
		target = path.Join(target, name)
	}
	_, err = sb.Upload(ctx, target, r, mode)
	return err
}

func remoteIsDir(ctx context.Context, sb *client.Sandbox, p string) (bool, error) {
	fi, err := sb.Stat(ctx, p)
	if errors.Is(err, client.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return fi.Type == "dir", nil
}

// download copies a file out of a sandbox to stdout, or to a temporary
// file beside the destination renamed into place once complete, so an
// interrupted copy never leaves a partial file behind.
func download(cmd *cobra.Command, a *app, src cpSpec, local string) (err error) {
	ctx := cmd.Context()
	sb, err := a.sandbox(ctx, src.ID)
	if err != nil {
		return err
	}
	fi, err := sb.Stat(ctx, src.Path)
	if err != nil {
		return err
	}
	if fi.Type == "dir" {
		return fmt.Errorf("%s:%s is a directory (use -r to copy directories)", src.ID, src.Path)
	}
	if local == "-" {
		_, err := sb.Download(ctx, src.Path, cmd.OutOrStdout())
		return err
	}
	target := local
	if st, err := os.Stat(target); err == nil && st.IsDir() {
		target = filepath.Join(target, path.Base(src.Path))
	} else if strings.HasSuffix(local, "/") {
		return fmt.Errorf("directory %s does not exist", local)
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".airlock-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := sb.Download(ctx, src.Path, tmp); err != nil {
		return err
	}
	perm := os.FileMode(fi.Mode) & os.ModePerm
	if perm == 0 {
		perm = 0o644
	}
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), target)
}
