package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/airlockdev/airlock/client"
)

// copyDir is cp -r: directories travel as tar streams, files as with cp.
// Like cp -r and docker cp, a directory lands inside DST when DST is an
// existing directory and becomes DST otherwise; SRC/. copies contents.
func copyDir(cmd *cobra.Command, a *app, src, dst cpSpec) error {
	if src.Path == "-" || dst.Path == "-" {
		return usagef("-r cannot copy stdin or stdout; without -r, '-' copies a single stream")
	}
	ctx := cmd.Context()
	if dst.remote() {
		fi, err := os.Stat(src.Path)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			return upload(cmd, a, src.Path, dst)
		}
		sb, err := a.sandbox(ctx, dst.ID)
		if err != nil {
			return err
		}
		abs, err := filepath.Abs(src.Path)
		if err != nil {
			return err
		}
		target, err := remoteTarget(ctx, sb, dst, filepath.Base(abs), contentsOnly(src.Path))
		if err != nil {
			return err
		}
		_, err = sb.UploadDir(ctx, src.Path, target)
		return err
	}
	sb, err := a.sandbox(ctx, src.ID)
	if err != nil {
		return err
	}
	fi, err := sb.Stat(ctx, src.Path)
	if err != nil {
		return err
	}
	if fi.Type != "dir" {
		return download(cmd, a, src, dst.Path)
	}
	target, err := localTarget(dst.Path, path.Base(path.Clean(src.Path)), contentsOnly(src.Path))
	if err != nil {
		return err
	}
	_, err = sb.DownloadDir(ctx, src.Path, target)
	return err
}

// contentsOnly reports a source written as DIR/. (or the root).
func contentsOnly(p string) bool {
	return strings.HasSuffix(p, "/.") || p == "." || path.Clean(p) == "/"
}

// remoteTarget is the sandbox directory a local directory named name is
// extracted into.
func remoteTarget(ctx context.Context, sb *client.Sandbox, dst cpSpec, name string, contents bool) (string, error) {
	fi, err := sb.Stat(ctx, dst.Path)
	switch {
	case errors.Is(err, client.ErrNotFound):
		return dst.Path, nil
	case err != nil:
		return "", err
	case fi.Type != "dir":
		return "", fmt.Errorf("%s:%s exists and is not a directory", dst.ID, dst.Path)
	case contents:
		return dst.Path, nil
	}
	return path.Join(dst.Path, name), nil
}

// localTarget is the local directory a sandbox directory named name is
// extracted into.
func localTarget(dst, name string, contents bool) (string, error) {
	fi, err := os.Stat(dst)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return dst, nil
	case err != nil:
		return "", err
	case !fi.IsDir():
		return "", fmt.Errorf("%s exists and is not a directory", dst)
	case contents:
		return dst, nil
	}
	return filepath.Join(dst, name), nil
}
