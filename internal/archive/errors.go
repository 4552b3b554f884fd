package archive

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/airlockdev/airlock/internal/errdefs"
)

// kindError carries a message and the errdefs sentinel that classifies
// it, without the sentinel's text appearing in the message.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

func invalid(format string, args ...any) error {
	return &kindError{msg: fmt.Sprintf(format, args...), kind: errdefs.ErrInvalidArgument}
}

func exhausted(format string, args ...any) error {
	return &kindError{msg: fmt.Sprintf(format, args...), kind: errdefs.ErrResourceExhausted}
}

func conflict(format string, args ...any) error {
	return &kindError{msg: fmt.Sprintf(format, args...), kind: errdefs.ErrConflict}
}

// classify names what failed and classifies a filesystem error. An os.Root
// error without an errno is its refusal to leave the root ("path escapes
// from parent"): the archive tried to reach outside the target.
func classify(what string, err error) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return &kindError{msg: fmt.Sprintf("%s: %v", what, err), kind: errdefs.ErrInvalidArgument}
		}
		return fmt.Errorf("%s: %w", what, err)
	}
	var kind error
	switch errno {
	case syscall.ENOENT:
		kind = errdefs.ErrNotFound
	case syscall.EEXIST, syscall.ENOTEMPTY:
		kind = errdefs.ErrConflict
	case syscall.ENOSPC, syscall.EDQUOT, syscall.EMFILE, syscall.ENFILE, syscall.EMLINK:
		kind = errdefs.ErrResourceExhausted
	case syscall.ENOTDIR, syscall.EISDIR, syscall.EACCES, syscall.EPERM,
		syscall.ELOOP, syscall.ENAMETOOLONG, syscall.EROFS, syscall.EXDEV,
		syscall.EINVAL, syscall.EBUSY, syscall.ETXTBSY:
		kind = errdefs.ErrInvalidArgument
	default:
		return fmt.Errorf("%s: %w", what, err)
	}
	return &kindError{msg: fmt.Sprintf("%s: %v", what, err), kind: kind}
}
