package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// errorStatus is the one place errors become HTTP statuses and codes.
func errorStatus(err error) (int, string) {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, api.CodeInvalidArgument
	case errors.Is(err, errdefs.ErrInvalidArgument):
		return http.StatusBadRequest, api.CodeInvalidArgument
	case errors.Is(err, errdefs.ErrNotFound):
		return http.StatusNotFound, api.CodeNotFound
	case errors.Is(err, errdefs.ErrConflict):
		return http.StatusConflict, api.CodeConflict
	case errors.Is(err, errdefs.ErrResourceExhausted):
		return http.StatusTooManyRequests, api.CodeResourceExhausted
	case errors.Is(err, errdefs.ErrUnavailable):
		return http.StatusServiceUnavailable, api.CodeUnavailable
	case errors.Is(err, errdefs.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, api.CodeDeadlineExceeded
	}
	return http.StatusInternalServerError, api.CodeInternal
}

func errorBody(err error) *api.ErrorBody {
	_, code := errorStatus(err)
	return &api.ErrorBody{Code: code, Message: err.Error()}
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code := errorStatus(err)
	if r.Context().Err() != nil && errors.Is(err, context.Canceled) {
		return // the client went away; nobody to answer
	}
	if status == http.StatusInternalServerError {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeJSON(w, status, api.ErrorResponse{Error: api.ErrorBody{Code: code, Message: err.Error()}})
}
