package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/airlockdev/airlock/internal/errdefs"
)

// kindError carries a message for the wire and the errdefs sentinel that
// selects its code, without the sentinel's text appearing in the message
// ("open /x: permission denied", not "...: invalid argument").
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// pathError classifies a filesystem error for the wire, naming op and path.
// Anything unrecognized stays unclassified and goes out as internal.
func pathError(op, path string, err error) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s %s: %w", op, path, errdefs.ErrNotFound)
		}
		return fmt.Errorf("%s %s: %w", op, path, err)
	}
	var kind error
	switch errno {
	case syscall.ENOENT:
		return fmt.Errorf("%s %s: %w", op, path, errdefs.ErrNotFound)
	case syscall.EEXIST, syscall.ENOTEMPTY:
		kind = errdefs.ErrConflict
	case syscall.ENOSPC, syscall.EDQUOT, syscall.EMFILE, syscall.ENFILE:
		kind = errdefs.ErrResourceExhausted
	case syscall.ENOTDIR, syscall.EISDIR, syscall.EACCES, syscall.EPERM,
		syscall.ELOOP, syscall.ENAMETOOLONG, syscall.EROFS, syscall.EXDEV,
		syscall.EINVAL, syscall.EBUSY, syscall.ETXTBSY:
		kind = errdefs.ErrInvalidArgument
	default:
		return fmt.Errorf("%s %s: %w", op, path, errno)
	}
	return &kindError{msg: fmt.Sprintf("%s %s: %s", op, path, errno.Error()), kind: kind}
}

// absPath validates a request path: the agent refuses relative paths so
// that callers never depend on its working directory.
func absPath(op, p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("%s: empty path: %w", op, errdefs.ErrInvalidArgument)
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%s %s: path is not absolute: %w", op, p, errdefs.ErrInvalidArgument)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%s %q: path contains NUL: %w", op, p, errdefs.ErrInvalidArgument)
	}
	return filepath.Clean(p), nil
}
