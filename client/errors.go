package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/airlockdev/airlock/api"
)

// Sentinel errors, one per API error code. An *APIError matches the one
// for its code, so callers write errors.Is(err, client.ErrNotFound).
var (
	ErrInvalidArgument   = errors.New("invalid argument")
	ErrNotFound          = errors.New("not found")
	ErrConflict          = errors.New("conflict")
	ErrResourceExhausted = errors.New("resource exhausted")
	ErrUnavailable       = errors.New("unavailable")
	ErrDeadlineExceeded  = errors.New("deadline exceeded")
)

var codeSentinels = map[string]error{
	api.CodeInvalidArgument:   ErrInvalidArgument,
	api.CodeNotFound:          ErrNotFound,
	api.CodeConflict:          ErrConflict,
	api.CodeResourceExhausted: ErrResourceExhausted,
	api.CodeUnavailable:       ErrUnavailable,
	api.CodeDeadlineExceeded:  ErrDeadlineExceeded,
}

// APIError is an error reported by the daemon, either as a non-2xx
// response or as an error event in the middle of a stream.
type APIError struct {
	// StatusCode is the HTTP status. For an error reported mid-stream, after
	// a 200 was sent, it is the status the code maps to.
	StatusCode int
	// Code is one of the api.Code* constants, such as "not_found".
	Code string
	// Message is the daemon's human-readable explanation.
	Message string
}

func (e *APIError) Error() string {
	if e.Message != "" {
		return e.Message
	}
	if e.Code != "" {
		return fmt.Sprintf("%s (HTTP %d)", e.Code, e.StatusCode)
	}
	return fmt.Sprintf("HTTP %d %s", e.StatusCode, http.StatusText(e.StatusCode))
}

// Is reports whether target is the sentinel for e's code.
func (e *APIError) Is(target error) bool {
	s, ok := codeSentinels[e.Code]
	return ok && s == target
}

// decodeError turns a non-2xx response into an *APIError. Bodies that are
// not the API's error JSON (from a proxy, say) are quoted in the message.
func decodeError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var er api.ErrorResponse
	if err := json.Unmarshal(b, &er); err == nil && er.Error.Code != "" {
		return &APIError{StatusCode: resp.StatusCode, Code: er.Error.Code, Message: er.Error.Message}
	}
	msg := fmt.Sprintf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	if text := strings.TrimSpace(string(b)); text != "" {
		if len(text) > 512 {
			text = text[:512] + "..."
		}
		msg += ": " + text
	}
	return &APIError{StatusCode: resp.StatusCode, Code: codeForStatus(resp.StatusCode), Message: msg}
}

// streamError turns an error event of a stream into an *APIError.
func streamError(body *api.ErrorBody) error {
	if body == nil {
		return &APIError{StatusCode: http.StatusInternalServerError, Code: api.CodeInternal, Message: "error event without details"}
	}
	return &APIError{StatusCode: statusForCode(body.Code), Code: body.Code, Message: body.Message}
}

func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return api.CodeInvalidArgument
	case http.StatusNotFound:
		return api.CodeNotFound
	case http.StatusConflict:
		return api.CodeConflict
	case http.StatusTooManyRequests:
		return api.CodeResourceExhausted
	case http.StatusServiceUnavailable, http.StatusBadGateway:
		return api.CodeUnavailable
	case http.StatusGatewayTimeout:
		return api.CodeDeadlineExceeded
	}
	return api.CodeInternal
}

func statusForCode(code string) int {
	switch code {
	case api.CodeInvalidArgument:
		return http.StatusBadRequest
	case api.CodeNotFound:
		return http.StatusNotFound
	case api.CodeConflict:
		return http.StatusConflict
	case api.CodeResourceExhausted:
		return http.StatusTooManyRequests
	case api.CodeUnavailable:
		return http.StatusServiceUnavailable
	case api.CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}
