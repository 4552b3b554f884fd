package server

import (
	"context"
	"fmt"
	"net/http"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// Secrets is the secret registry the API serves. Values go in, never out.
type Secrets interface {
	Put(ctx context.Context, req api.CreateSecretRequest) (api.Secret, error)
	Get(ctx context.Context, name string) (api.Secret, error)
	List(ctx context.Context) ([]api.Secret, error)
	Delete(ctx context.Context, name string) error
}

// WithSecrets enables the /v1/secrets routes.
func (s *Server) WithSecrets(sec Secrets) *Server {
	s.secrets = sec
	return s
}

func (s *Server) setNetwork(w http.ResponseWriter, r *http.Request) error {
	var req api.NetworkPolicy
	if err := decodeJSON(w, r, maxJSONBody, &req); err != nil {
		return err
	}
	sb, err := s.sandboxes.SetNetworkPolicy(r.Context(), r.PathValue("id"), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, sb)
}

func (s *Server) secretRegistry() (Secrets, error) {
	if s.secrets == nil {
		return nil, fmt.Errorf("%w: secrets brokering is not enabled on this daemon", errdefs.ErrUnavailable)
	}
	return s.secrets, nil
}

func (s *Server) putSecret(w http.ResponseWriter, r *http.Request) error {
	reg, err := s.secretRegistry()
	if err != nil {
		return err
	}
	var req api.CreateSecretRequest
	if err := decodeJSON(w, r, maxJSONBody, &req); err != nil {
		return err
	}
	sec, err := reg.Put(r.Context(), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, sec)
}

func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request) error {
	reg, err := s.secretRegistry()
	if err != nil {
		return err
	}
	list, err := reg.List(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, api.SecretList{Secrets: list})
}

func (s *Server) getSecret(w http.ResponseWriter, r *http.Request) error {
	reg, err := s.secretRegistry()
	if err != nil {
		return err
	}
	sec, err := reg.Get(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, sec)
}

func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request) error {
	reg, err := s.secretRegistry()
	if err != nil {
		return err
	}
	if err := reg.Delete(r.Context(), r.PathValue("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
