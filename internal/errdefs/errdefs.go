// Package errdefs holds the few error sentinels that cross package
// boundaries. Callers wrap them with %w and test them with errors.Is; the
// HTTP server maps them to status codes in one place.
package errdefs

import "errors"

var (
	ErrInvalidArgument   = errors.New("invalid argument")
	ErrNotFound          = errors.New("not found")
	ErrConflict          = errors.New("conflict")
	ErrResourceExhausted = errors.New("resource exhausted")
	ErrUnavailable       = errors.New("unavailable")
	ErrDeadlineExceeded  = errors.New("deadline exceeded")
)
