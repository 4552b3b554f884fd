package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/airlockdev/airlock/api"
)

// DefaultHost is the daemon address used when none is given.
const DefaultHost = "http://127.0.0.1:7878"

// Client talks to one Airlock daemon. It is safe for concurrent use.
type Client struct {
	base      string // scheme://host[/prefix], no trailing slash
	http      *http.Client
	userAgent string
	apiKey    string
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client used for requests. Do not give it a
// Timeout: exec streams, uploads and downloads can legitimately run long;
// bound calls with their context instead.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.http = hc
		}
	}
}

// WithUserAgent sets the User-Agent header of every request.
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.userAgent = ua }
}

// WithAPIKey sends key as "Authorization: Bearer <key>" on every request.
func WithAPIKey(key string) Option {
	return func(c *Client) { c.apiKey = key }
}

// New returns a client for the daemon at baseURL, such as
// "http://127.0.0.1:7878". A bare "host:port" means http. A path in baseURL
// is kept as a prefix, for daemons behind a reverse proxy.
func New(baseURL string, opts ...Option) (*Client, error) {
	s := strings.TrimSpace(baseURL)
	if s == "" {
		return nil, fmt.Errorf("airlock: empty daemon address")
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("airlock: invalid daemon address %q: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("airlock: invalid daemon address %q: scheme must be http or https", baseURL)
	}
	if u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("airlock: invalid daemon address %q: want http://host:port", baseURL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	c := &Client{
		base:      u.String(),
		http:      http.DefaultClient,
		userAgent: "airlock-go",
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// FromEnv returns a client for the daemon named by $AIRLOCK_HOST (default
// DefaultHost), authenticating with $AIRLOCK_API_KEY when it is set.
// Options are applied after the environment.
func FromEnv(opts ...Option) (*Client, error) {
	host := os.Getenv("AIRLOCK_HOST")
	if host == "" {
		host = DefaultHost
	}
	if key := os.Getenv("AIRLOCK_API_KEY"); key != "" {
		opts = append([]Option{WithAPIKey(key)}, opts...)
	}
	return New(host, opts...)
}

// BaseURL is the daemon address requests go to.
func (c *Client) BaseURL() string { return c.base }

// Info describes the daemon: version, runtimes and templates.
func (c *Client) Info(ctx context.Context) (*api.Info, error) {
	var info api.Info
	if err := c.doJSON(ctx, http.MethodGet, "/v1/info", nil, nil, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// sandboxPath is the API path of a sandbox, or of a sub-resource of it.
func sandboxPath(id string, sub string) (string, error) {
	if id == "" {
		return "", fmt.Errorf("%w: sandbox id is empty", ErrInvalidArgument)
	}
	return "/v1/sandboxes/" + url.PathEscape(id) + sub, nil
}

// newRequest builds a request for path (already escaped) and query.
func (c *Client) newRequest(ctx context.Context, method, path string, query url.Values, body io.Reader) (*http.Request, error) {
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	return req, nil
}

// do sends req and turns a non-2xx response into an *APIError. On success
// the caller owns resp.Body.
func (c *Client) do(req *http.Request) (*http.Response, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

// doJSON sends in (if not nil) as a JSON body and decodes the response
// into out (if not nil).
func (c *Client) doJSON(ctx context.Context, method, path string, query url.Values, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("airlock: encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := c.newRequest(ctx, method, path, query, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.do(req)
	if err != nil {
		return err
	}
	defer closeBody(resp)
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("airlock: decode %s %s response: %w", method, path, err)
	}
	return nil
}

// closeBody drains a little of what is left, so the connection can be
// reused, and closes the body.
func closeBody(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}
