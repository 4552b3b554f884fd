package server

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/errdefs"
)

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) error {
	var req api.CreateSandboxRequest
	if err := decodeJSON(w, r, maxJSONBody, &req); err != nil {
		return err
	}
	sb, err := s.sandboxes.Create(r.Context(), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, sb)
}

// listSandboxes filters by ?label=k=v, repeatable; all must match.
func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) error {
	labels := map[string]string{}
	for _, l := range r.URL.Query()["label"] {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return fmt.Errorf("%w: label filter %q must be key=value", errdefs.ErrInvalidArgument, l)
		}
		labels[k] = v
	}
	return writeJSON(w, http.StatusOK, api.SandboxList{Sandboxes: s.sandboxes.List(r.Context(), labels)})
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) error {
	sb, err := s.sandboxes.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, sb)
}

func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request) error {
	if err := s.sandboxes.Delete(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) setTimeout(w http.ResponseWriter, r *http.Request) error {
	var req api.SetTimeoutRequest
	if err := decodeJSON(w, r, maxJSONBody, &req); err != nil {
		return err
	}
	sb, err := s.sandboxes.SetTimeout(r.Context(), r.PathValue("id"), req.TimeoutSeconds)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, sb)
}
