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
	"strconv"

	"github.com/airlockdev/airlock/api"
)

// PIDSelector turns a pid into the selector the process methods take,
// which is a pid or a tag.
func PIDSelector(pid int) string { return strconv.Itoa(pid) }

// processPath is the API path of a process (sel is a pid or tag), or of a
// sub-resource of it.
func processPath(id, sel, sub string) (string, error) {
	if sel == "" {
		return "", fmt.Errorf("%w: process selector is empty, want a pid or tag", ErrInvalidArgument)
	}
	return sandboxPath(id, "/processes/"+url.PathEscape(sel)+sub)
}

// StartProcess starts a background process and returns at once. The
// process keeps running when this client goes away; its output is kept
// (the last 1 MiB) for AttachProcess.
func (s *Sandbox) StartProcess(ctx context.Context, req api.StartProcessRequest) (*api.Process, error) {
	p, err := sandboxPath(s.ID, "/processes")
	if err != nil {
		return nil, err
	}
	var proc api.Process
	if err := s.c.doJSON(ctx, http.MethodPost, p, nil, req, &proc); err != nil {
		return nil, err
	}
	return &proc, nil
}

// ListProcesses lists the sandbox's background processes, running ones
// and exited ones whose status is still kept.
func (s *Sandbox) ListProcesses(ctx context.Context) ([]api.Process, error) {
	p, err := sandboxPath(s.ID, "/processes")
	if err != nil {
		return nil, err
	}
	var list api.ProcessList
	if err := s.c.doJSON(ctx, http.MethodGet, p, nil, nil, &list); err != nil {
		return nil, err
	}
	return list.Processes, nil
}

// AttachProcess copies a process's output to stdout and stderr (either
// may be nil), from the oldest byte still buffered, and follows it until
// the process exits; it returns the process with its exit status.
// Terminal output of a PTY process goes to stdout. Canceling ctx only
// detaches: the process keeps running.
func (s *Sandbox) AttachProcess(ctx context.Context, sel string, stdout, stderr io.Writer) (*api.Process, error) {
	return s.processOutput(ctx, sel, true, stdout, stderr)
}

// ProcessOutput is AttachProcess without following: it copies what is
// buffered and returns the process as it is now, running or not.
func (s *Sandbox) ProcessOutput(ctx context.Context, sel string, stdout, stderr io.Writer) (*api.Process, error) {
	return s.processOutput(ctx, sel, false, stdout, stderr)
}

func (s *Sandbox) processOutput(ctx context.Context, sel string, follow bool, stdout, stderr io.Writer) (*api.Process, error) {
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	p, err := processPath(s.ID, sel, "/output")
	if err != nil {
		return nil, err
	}
	q := url.Values{"stream": {"ndjson"}}
	if !follow {
		q.Set("follow", "false")
	}
	req, err := s.c.newRequest(ctx, http.MethodGet, p, q, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := s.c.do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var ev api.ProcessEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("airlock: process output ended before the exit event: %w", err)
		}
		switch ev.Type {
		case api.EventStdout, api.EventPTY:
			if _, err := stdout.Write(ev.Data); err != nil {
				return nil, fmt.Errorf("airlock: write stdout: %w", err)
			}
		case api.EventStderr:
			if _, err := stderr.Write(ev.Data); err != nil {
				return nil, fmt.Errorf("airlock: write stderr: %w", err)
			}
		case api.EventExit, api.EventRunning:
			if ev.Process == nil {
				return nil, fmt.Errorf("airlock: %s event without a process", ev.Type)
			}
			return ev.Process, nil
		case api.EventError:
			return nil, streamError(ev.Error)
		}
		// start, dropped and unknown events carry nothing to copy.
	}
}

// SendStdin writes r to the process's stdin (or its terminal) and returns
// the bytes written. The process must have been started with Stdin or a
// PTY. Stdin stays open: see CloseStdin.
func (s *Sandbox) SendStdin(ctx context.Context, sel string, r io.Reader) (int64, error) {
	p, err := processPath(s.ID, sel, "/stdin")
	if err != nil {
		return 0, err
	}
	req, err := s.c.newRequest(ctx, http.MethodPost, p, nil, io.NopCloser(r))
	if err != nil {
		return 0, err
	}
	if b, ok := r.(*bytes.Reader); ok {
		req.ContentLength = int64(b.Len())
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Accept", "application/json")
	resp, err := s.c.do(req)
	if err != nil {
		return 0, err
	}
	defer closeBody(resp)
	var res api.StdinResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return 0, fmt.Errorf("airlock: decode stdin response: %w", err)
	}
	return res.Bytes, nil
}

// CloseStdin closes the process's stdin, so it reads end of file.
func (s *Sandbox) CloseStdin(ctx context.Context, sel string) error {
	p, err := processPath(s.ID, sel, "/stdin/close")
	if err != nil {
		return err
	}
	return s.c.doJSON(ctx, http.MethodPost, p, nil, nil, nil)
}

// Signal sends a signal (a name such as "TERM" or "SIGINT", or a number)
// to the process's group.
func (s *Sandbox) Signal(ctx context.Context, sel, signal string) error {
	p, err := processPath(s.ID, sel, "/signal")
	if err != nil {
		return err
	}
	return s.c.doJSON(ctx, http.MethodPost, p, nil, api.SignalRequest{Signal: signal}, nil)
}

// Kill kills the process and everything it started, and returns it with
// its exit status once it is gone.
func (s *Sandbox) Kill(ctx context.Context, sel string) (*api.Process, error) {
	p, err := processPath(s.ID, sel, "")
	if err != nil {
		return nil, err
	}
	var proc api.Process
	if err := s.c.doJSON(ctx, http.MethodDelete, p, nil, nil, &proc); err != nil {
		return nil, err
	}
	return &proc, nil
}
