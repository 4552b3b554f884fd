package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"

	"github.com/airlockdev/airlock/api"
)

// Exec runs a command in the sandbox and waits for it, returning its
// output buffered in the result (capped by req.MaxOutputBytes or the
// daemon's default; see the Truncated fields). A command that fails or
// times out is not an error: check ExitCode and TimedOut.
func (s *Sandbox) Exec(ctx context.Context, req api.ExecRequest) (*api.ExecResult, error) {
	p, err := sandboxPath(s.ID, "/exec")
	if err != nil {
		return nil, err
	}
	var res api.ExecResult
	if err := s.c.doJSON(ctx, http.MethodPost, p, nil, req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// ExecStream runs a command in the sandbox, copying its stdout and stderr
// to the given writers (either may be nil) as the output is produced. The
// result carries the exit status but no output. Canceling ctx kills the
// command. An error the daemon reports after the command started is
// returned as an *APIError.
func (s *Sandbox) ExecStream(ctx context.Context, req api.ExecRequest, stdout, stderr io.Writer) (*api.ExecResult, error) {
	p, err := sandboxPath(s.ID, "/exec")
	if err != nil {
		return nil, err
	}
	_, res, err := s.c.stream(ctx, p, req, stdout, stderr)
	return res, err
}

// Run creates a sandbox, runs one command in it and deletes the sandbox,
// returning buffered output like Sandbox.Exec.
func (c *Client) Run(ctx context.Context, req api.RunRequest) (*api.RunResult, error) {
	var res api.RunResult
	if err := c.doJSON(ctx, http.MethodPost, "/v1/run", nil, req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// RunStream is Run with output streamed to stdout and stderr like
// Sandbox.ExecStream.
func (c *Client) RunStream(ctx context.Context, req api.RunRequest, stdout, stderr io.Writer) (*api.RunResult, error) {
	id, res, err := c.stream(ctx, "/v1/run", req, stdout, stderr)
	if err != nil {
		return nil, err
	}
	return &api.RunResult{SandboxID: id, ExecResult: *res}, nil
}

// stream posts an exec or run request asking for NDJSON events and
// dispatches them. It returns the sandbox id from the start event (set by
// run) and the exit result.
func (c *Client) stream(ctx context.Context, path string, in any, stdout, stderr io.Writer) (string, *api.ExecResult, error) {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	resp, err := c.postStream(ctx, path, in)
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()

	// A daemon that does not stream answers with the buffered result.
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
		var res api.RunResult
		if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
			return "", nil, fmt.Errorf("airlock: decode %s response: %w", path, err)
		}
		if _, err := io.WriteString(stdout, res.Stdout); err != nil {
			return res.SandboxID, nil, err
		}
		if _, err := io.WriteString(stderr, res.Stderr); err != nil {
			return res.SandboxID, nil, err
		}
		res.Stdout, res.Stderr = "", ""
		return res.SandboxID, &res.ExecResult, nil
	}

	var sandboxID string
	dec := json.NewDecoder(resp.Body)
	for {
		var ev api.ExecEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return sandboxID, nil, fmt.Errorf("airlock: exec stream ended before the exit event: %w", err)
		}
		switch ev.Type {
		case api.EventStart:
			if ev.SandboxID != "" {
				sandboxID = ev.SandboxID
			}
		case api.EventStdout:
			if _, err := stdout.Write(ev.Data); err != nil {
				return sandboxID, nil, fmt.Errorf("airlock: write stdout: %w", err)
			}
		case api.EventStderr:
			if _, err := stderr.Write(ev.Data); err != nil {
				return sandboxID, nil, fmt.Errorf("airlock: write stderr: %w", err)
			}
		case api.EventExit:
			if ev.Exit == nil {
				return sandboxID, nil, errors.New("airlock: exit event without a result")
			}
			return sandboxID, ev.Exit, nil
		case api.EventError:
			return sandboxID, nil, streamError(ev.Error)
		}
		// Unknown event types are skipped, for forward compatibility.
	}
}

// postStream posts in as JSON to path asking for an NDJSON event stream.
// The caller closes the body.
func (c *Client) postStream(ctx context.Context, path string, in any) (*http.Response, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("airlock: encode request: %w", err)
	}
	req, err := c.newRequest(ctx, http.MethodPost, path, url.Values{"stream": {"ndjson"}}, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	return c.do(req)
}
