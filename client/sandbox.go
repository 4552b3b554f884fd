package client

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/airlockdev/airlock/api"
)

// Sandbox is a sandbox as last seen by the client, with methods to use it.
// The embedded api.Sandbox is refreshed by Refresh and SetTimeout.
type Sandbox struct {
	api.Sandbox
	c *Client
}

// CreateSandbox creates and starts a sandbox. Zero fields of req take the
// daemon's defaults.
func (c *Client) CreateSandbox(ctx context.Context, req api.CreateSandboxRequest) (*Sandbox, error) {
	sb := &Sandbox{c: c}
	if err := c.doJSON(ctx, http.MethodPost, "/v1/sandboxes", nil, req, &sb.Sandbox); err != nil {
		return nil, err
	}
	return sb, nil
}

// Sandbox looks up an existing sandbox. It fails with ErrNotFound if there
// is none with that id.
func (c *Client) Sandbox(ctx context.Context, id string) (*Sandbox, error) {
	p, err := sandboxPath(id, "")
	if err != nil {
		return nil, err
	}
	sb := &Sandbox{c: c}
	if err := c.doJSON(ctx, http.MethodGet, p, nil, nil, &sb.Sandbox); err != nil {
		return nil, err
	}
	return sb, nil
}

// ListSandboxes lists sandboxes, keeping those that carry every given label
// (all of them when labels is empty).
func (c *Client) ListSandboxes(ctx context.Context, labels map[string]string) ([]api.Sandbox, error) {
	var q url.Values
	if len(labels) > 0 {
		q = url.Values{}
		keys := make([]string, 0, len(labels))
		for k := range labels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			q.Add("label", k+"="+labels[k])
		}
	}
	var list api.SandboxList
	if err := c.doJSON(ctx, http.MethodGet, "/v1/sandboxes", q, nil, &list); err != nil {
		return nil, err
	}
	return list.Sandboxes, nil
}

// DeleteSandbox stops a sandbox and deletes it with its files. Deleting a
// sandbox that does not exist succeeds.
func (c *Client) DeleteSandbox(ctx context.Context, id string) error {
	p, err := sandboxPath(id, "")
	if err != nil {
		return err
	}
	return c.doJSON(ctx, http.MethodDelete, p, nil, nil, nil)
}

// Client is the client the sandbox was obtained from.
func (s *Sandbox) Client() *Client { return s.c }

// Refresh reloads the sandbox's description from the daemon.
func (s *Sandbox) Refresh(ctx context.Context) error {
	fresh, err := s.c.Sandbox(ctx, s.ID)
	if err != nil {
		return err
	}
	s.Sandbox = fresh.Sandbox
	return nil
}

// Delete stops the sandbox and deletes it with its files.
func (s *Sandbox) Delete(ctx context.Context) error {
	return s.c.DeleteSandbox(ctx, s.ID)
}

// SetTimeout makes the sandbox expire d from now (rounded up to whole
// seconds), extending or shortening its life.
func (s *Sandbox) SetTimeout(ctx context.Context, d time.Duration) error {
	p, err := sandboxPath(s.ID, "/timeout")
	if err != nil {
		return err
	}
	var sb api.Sandbox
	req := api.SetTimeoutRequest{TimeoutSeconds: ceilSeconds(d)}
	if err := s.c.doJSON(ctx, http.MethodPost, p, nil, req, &sb); err != nil {
		return err
	}
	s.Sandbox = sb
	return nil
}

// ceilSeconds rounds a positive duration up to whole seconds.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return int64(d / time.Second)
	}
	return int64((d + time.Second - 1) / time.Second)
}
