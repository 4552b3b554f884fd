package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/airlockdev/airlock/api"
)

// Templates lists the templates the daemon has built.
func (c *Client) Templates(ctx context.Context) ([]api.Template, error) {
	var list api.TemplateList
	if err := c.doJSON(ctx, http.MethodGet, "/v1/templates", nil, nil, &list); err != nil {
		return nil, err
	}
	return list.Templates, nil
}

// BuildTemplate builds the named template, or returns the cached one
// unless force is set. Build output is written line by line to progress
// (which may be nil). Building a template can take minutes.
func (c *Client) BuildTemplate(ctx context.Context, name string, force bool, progress io.Writer) (*api.Template, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: template name is empty", ErrInvalidArgument)
	}
	if progress == nil {
		progress = io.Discard
	}
	b, err := json.Marshal(api.BuildTemplateRequest{Force: force})
	if err != nil {
		return nil, err
	}
	req, err := c.newRequest(ctx, http.MethodPost, "/v1/templates/"+url.PathEscape(name)+"/build", nil, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := c.do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var ev api.TemplateBuildEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("airlock: template build stream ended before the result: %w", err)
		}
		switch ev.Type {
		case "log":
			if _, err := io.WriteString(progress, ev.Line+"\n"); err != nil {
				return nil, fmt.Errorf("airlock: write progress: %w", err)
			}
		case "done":
			if ev.Template == nil {
				return nil, errors.New("airlock: template build finished without a template")
			}
			return ev.Template, nil
		case "error":
			return nil, streamError(ev.Error)
		}
	}
}
