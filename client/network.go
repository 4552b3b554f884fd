package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/airlockdev/airlock/api"
)

// SetNetworkPolicy changes the sandbox's egress policy. A sandbox created
// with network mode none cannot get a network later (ErrConflict).
func (s *Sandbox) SetNetworkPolicy(ctx context.Context, p api.NetworkPolicy) error {
	path, err := sandboxPath(s.ID, "/network")
	if err != nil {
		return err
	}
	var sb api.Sandbox
	if err := s.c.doJSON(ctx, http.MethodPut, path, nil, p, &sb); err != nil {
		return err
	}
	s.Sandbox = sb
	return nil
}

func secretPath(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: secret name is empty", ErrInvalidArgument)
	}
	return "/v1/secrets/" + url.PathEscape(name), nil
}

// PutSecret registers a secret, or replaces one of the same name. The
// value can never be read back.
func (c *Client) PutSecret(ctx context.Context, req api.CreateSecretRequest) (*api.Secret, error) {
	var sec api.Secret
	if err := c.doJSON(ctx, http.MethodPost, "/v1/secrets", nil, req, &sec); err != nil {
		return nil, err
	}
	return &sec, nil
}

// Secret describes a registered secret (without its value).
func (c *Client) Secret(ctx context.Context, name string) (*api.Secret, error) {
	p, err := secretPath(name)
	if err != nil {
		return nil, err
	}
	var sec api.Secret
	if err := c.doJSON(ctx, http.MethodGet, p, nil, nil, &sec); err != nil {
		return nil, err
	}
	return &sec, nil
}

// ListSecrets describes every registered secret.
func (c *Client) ListSecrets(ctx context.Context) ([]api.Secret, error) {
	var list api.SecretList
	if err := c.doJSON(ctx, http.MethodGet, "/v1/secrets", nil, nil, &list); err != nil {
		return nil, err
	}
	return list.Secrets, nil
}

// DeleteSecret removes a secret; deleting a missing one succeeds.
func (c *Client) DeleteSecret(ctx context.Context, name string) error {
	p, err := secretPath(name)
	if err != nil {
		return err
	}
	return c.doJSON(ctx, http.MethodDelete, p, nil, nil, nil)
}
