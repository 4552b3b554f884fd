// Package secrets manages the secrets an operator registers for
// brokering: validation, storage, and lookup for the egress proxy. A
// secret's value is never returned by the API.
package secrets

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/errdefs"
	"github.com/airlockdev/airlock/internal/netpolicy"
	"github.com/airlockdev/airlock/internal/store"
)

// Store persists secrets.
type Store interface {
	PutSecret(store.Secret) error
	GetSecret(name string) (store.Secret, error)
	DeleteSecret(name string) error
	ListSecrets() ([]store.Secret, error)
}

// Limits on a secret.
const (
	MinValueBytes = 8 // shorter values cannot be told apart from ordinary text when scrubbing responses
	MaxValueBytes = 16 << 10
	MaxHosts      = 32
)

// nameRE: a secret's name is the environment variable it appears as.
var nameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// Service is the secret registry.
type Service struct{ store Store }

// New returns a registry over st.
func New(st Store) *Service { return &Service{store: st} }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errdefs.ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// Put registers or replaces a secret.
func (s *Service) Put(ctx context.Context, req api.CreateSecretRequest) (api.Secret, error) {
	if !nameRE.MatchString(req.Name) {
		return api.Secret{}, invalid("secret name %q must be an environment variable name (letters, digits, '_', not starting with a digit, at most 128)", req.Name)
	}
	if n := len(req.Value); n < MinValueBytes || n > MaxValueBytes {
		return api.Secret{}, invalid("secret value must be %d to %d bytes, got %d", MinValueBytes, MaxValueBytes, n)
	}
	if len(req.Hosts) == 0 || len(req.Hosts) > MaxHosts {
		return api.Secret{}, invalid("secret hosts must list 1 to %d host names, got %d", MaxHosts, len(req.Hosts))
	}
	var hosts []string
	for _, h := range req.Hosts {
		p, err := netpolicy.ParsePattern(h)
		if err != nil {
			return api.Secret{}, invalid("secret host %q: %v", h, err)
		}
		hosts = append(hosts, p)
	}
	now := time.Now().UTC()
	sec := store.Secret{Secret: api.Secret{Name: req.Name, Hosts: hosts, CreatedAt: now, UpdatedAt: now}, Value: req.Value}
	if old, err := s.store.GetSecret(req.Name); err == nil {
		sec.CreatedAt = old.CreatedAt
	}
	if err := s.store.PutSecret(sec); err != nil {
		return api.Secret{}, fmt.Errorf("save secret: %w", err)
	}
	return sec.Secret, nil
}

// Get describes a secret, without its value.
func (s *Service) Get(ctx context.Context, name string) (api.Secret, error) {
	sec, err := s.store.GetSecret(name)
	if err != nil {
		return api.Secret{}, err
	}
	return sec.Secret, nil
}

// List describes every secret, without values.
func (s *Service) List(ctx context.Context) ([]api.Secret, error) {
	all, err := s.store.ListSecrets()
	if err != nil {
		return nil, err
	}
	out := []api.Secret{}
	for _, sec := range all {
		out = append(out, sec.Secret)
	}
	return out, nil
}

// Delete removes a secret; deleting a missing one is not an error, so
// clients can retry. Sandboxes that use it keep their placeholder, which
// from then on is sent unchanged.
func (s *Service) Delete(ctx context.Context, name string) error {
	return s.store.DeleteSecret(name)
}

// Value returns a secret's value and hosts, for the egress proxy only.
func (s *Service) Value(name string) (value string, hosts []string, err error) {
	sec, err := s.store.GetSecret(name)
	if err != nil {
		return "", nil, err
	}
	return sec.Value, sec.Hosts, nil
}
