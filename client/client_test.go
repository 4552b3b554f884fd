package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockdev/airlock/api"
)

// The fake daemon below imitates the real server's responses (status
// codes, content types, error bodies, NDJSON events) to test the client's
// logic only; end-to-end tests against a real daemon live elsewhere.

func newTestClient(t *testing.T, h http.Handler, opts ...Option) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeAPIError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, api.ErrorResponse{Error: api.ErrorBody{Code: code, Message: msg}})
}

// ndjson writes events one line at a time, flushing each like the server.
func ndjson(w http.ResponseWriter, events ...api.ExecEvent) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	for _, ev := range events {
		b, _ := json.Marshal(ev)
		w.Write(append(b, '\n'))
		w.(http.Flusher).Flush()
	}
}

func TestNewAddress(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		bad      bool
	}{
		{in: "http://127.0.0.1:7878", want: "http://127.0.0.1:7878"},
		{in: "http://127.0.0.1:7878/", want: "http://127.0.0.1:7878"},
		{in: "127.0.0.1:7999", want: "http://127.0.0.1:7999"},
		{in: "localhost:7878", want: "http://localhost:7878"},
		{in: "https://airlock.example.com/prefix/", want: "https://airlock.example.com/prefix"},
		{in: "", bad: true},
		{in: "ftp://host:21", bad: true},
		{in: "http://", bad: true},
		{in: "http://host:1?x=y", bad: true},
	} {
		c, err := New(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("New(%q) = %q, want error", tc.in, c.BaseURL())
			}
			continue
		}
		if err != nil {
			t.Errorf("New(%q): %v", tc.in, err)
			continue
		}
		if c.BaseURL() != tc.want {
			t.Errorf("New(%q).BaseURL() = %q, want %q", tc.in, c.BaseURL(), tc.want)
		}
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv("AIRLOCK_HOST", "10.0.0.1:9000")
	c, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.BaseURL() != "http://10.0.0.1:9000" {
		t.Errorf("BaseURL = %q", c.BaseURL())
	}
	t.Setenv("AIRLOCK_HOST", "")
	if c, _ := FromEnv(); c.BaseURL() != DefaultHost {
		t.Errorf("default BaseURL = %q", c.BaseURL())
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		status   int
		code     string
		sentinel error
	}{
		{http.StatusNotFound, api.CodeNotFound, ErrNotFound},
		{http.StatusBadRequest, api.CodeInvalidArgument, ErrInvalidArgument},
		{http.StatusConflict, api.CodeConflict, ErrConflict},
		{http.StatusTooManyRequests, api.CodeResourceExhausted, ErrResourceExhausted},
		{http.StatusServiceUnavailable, api.CodeUnavailable, ErrUnavailable},
		{http.StatusGatewayTimeout, api.CodeDeadlineExceeded, ErrDeadlineExceeded},
	} {
		t.Run(tc.code, func(t *testing.T) {
			c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				writeAPIError(w, tc.status, tc.code, "sandbox sb-x: "+tc.code)
			}))
			_, err := c.Sandbox(context.Background(), "sb-x")
			if !errors.Is(err, tc.sentinel) {
				t.Fatalf("err = %v, want errors.Is %v", err, tc.sentinel)
			}
			for _, other := range codeSentinels {
				if other != tc.sentinel && errors.Is(err, other) {
					t.Errorf("err also matches %v", other)
				}
			}
			var ae *APIError
			if !errors.As(err, &ae) || ae.StatusCode != tc.status || ae.Code != tc.code || ae.Message != "sandbox sb-x: "+tc.code {
				t.Fatalf("err = %#v", err)
			}
			if err.Error() != ae.Message {
				t.Errorf("Error() = %q", err.Error())
			}
		})
	}

	t.Run("internal", func(t *testing.T) {
		c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeAPIError(w, 500, api.CodeInternal, "boom")
		}))
		err := c.DeleteSandbox(context.Background(), "sb-x")
		var ae *APIError
		if !errors.As(err, &ae) || ae.Code != api.CodeInternal || ae.StatusCode != 500 {
			t.Fatalf("err = %#v", err)
		}
		for _, s := range codeSentinels {
			if errors.Is(err, s) {
				t.Errorf("internal error matches %v", s)
			}
		}
	})

	t.Run("non-JSON body", func(t *testing.T) {
		c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
		}))
		_, err := c.Info(context.Background())
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("err = %v, want ErrUnavailable", err)
		}
		if !strings.Contains(err.Error(), "502") || !strings.Contains(err.Error(), "bad gateway") {
			t.Errorf("message %q should quote status and body", err.Error())
		}
	})

	t.Run("empty id", func(t *testing.T) {
		c, _ := New("127.0.0.1:1")
		if _, err := c.Sandbox(context.Background(), ""); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestHeadersAndSandboxCalls(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	var mu sync.Mutex
	var got []string
	mux := http.NewServeMux()
	record := func(r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.Method+" "+r.URL.RequestURI())
		if r.Header.Get("Authorization") != "Bearer k3y" || r.Header.Get("User-Agent") != "test-agent" {
			t.Errorf("%s %s: headers %v", r.Method, r.URL, r.Header)
		}
	}
	mux.HandleFunc("POST /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		var req api.CreateSandboxRequest
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeAPIError(w, 400, api.CodeInvalidArgument, err.Error())
			return
		}
		writeJSON(w, http.StatusCreated, api.Sandbox{ID: "sb-1", Template: req.Template, Runtime: req.Runtime,
			Labels: req.Labels, State: api.StateRunning, CreatedAt: now, ExpiresAt: now.Add(15 * time.Minute)})
	})
	mux.HandleFunc("GET /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		writeJSON(w, 200, api.SandboxList{Sandboxes: []api.Sandbox{{ID: "sb-1"}, {ID: "sb-2"}}})
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		writeJSON(w, 200, api.Sandbox{ID: r.PathValue("id"), State: api.StateRunning, TimeoutSeconds: 900})
	})
	mux.HandleFunc("POST /v1/sandboxes/{id}/timeout", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		var req api.SetTimeoutRequest
		json.NewDecoder(r.Body).Decode(&req)
		writeJSON(w, 200, api.Sandbox{ID: r.PathValue("id"), TimeoutSeconds: req.TimeoutSeconds, ExpiresAt: now.Add(time.Duration(req.TimeoutSeconds) * time.Second)})
	})
	mux.HandleFunc("DELETE /v1/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		w.WriteHeader(http.StatusNoContent)
	})
	c := newTestClient(t, mux, WithAPIKey("k3y"), WithUserAgent("test-agent"))
	ctx := context.Background()

	sb, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{Template: "base", Runtime: api.RuntimeRunc, Labels: map[string]string{"a": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	if sb.ID != "sb-1" || sb.Runtime != api.RuntimeRunc || sb.Labels["a"] != "1" || !sb.CreatedAt.Equal(now) {
		t.Errorf("created %+v", sb.Sandbox)
	}
	if err := sb.SetTimeout(ctx, 90*time.Second+time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if sb.TimeoutSeconds != 91 {
		t.Errorf("SetTimeout sent %d seconds, want 91 (rounded up)", sb.TimeoutSeconds)
	}
	if err := sb.Refresh(ctx); err != nil || sb.TimeoutSeconds != 900 {
		t.Errorf("Refresh: %v, %+v", err, sb.Sandbox)
	}
	list, err := c.ListSandboxes(ctx, map[string]string{"b": "2", "a": "x=y"})
	if err != nil || len(list) != 2 {
		t.Fatalf("ListSandboxes = %v, %v", list, err)
	}
	if err := sb.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sandbox(ctx, "id/with space"); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"POST /v1/sandboxes",
		"POST /v1/sandboxes/sb-1/timeout",
		"GET /v1/sandboxes/sb-1",
		"GET /v1/sandboxes?label=a%3Dx%3Dy&label=b%3D2",
		"DELETE /v1/sandboxes/sb-1",
		"GET /v1/sandboxes/id%2Fwith%20space",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// orderedWriter records which stream each write went to, in order.
type orderedWriter struct {
	mu  *sync.Mutex
	log *[]string
	tag string
}

func (w orderedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	*w.log = append(*w.log, w.tag+":"+string(p))
	return len(p), nil
}

func TestExecStream(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/{id}/exec", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "application/x-ndjson" || r.URL.Query().Get("stream") != "ndjson" {
			t.Errorf("not asked to stream: Accept=%q query=%q", r.Header.Get("Accept"), r.URL.RawQuery)
		}
		var req api.ExecRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Error(err)
		}
		switch req.Shell {
		case "ok":
			ndjson(w,
				api.ExecEvent{Type: api.EventStart, PID: 42},
				api.ExecEvent{Type: api.EventStdout, Data: []byte("out1\n")},
				api.ExecEvent{Type: api.EventStderr, Data: []byte("err1\n")},
				api.ExecEvent{Type: "progress"}, // unknown: skipped
				api.ExecEvent{Type: api.EventStdout, Data: []byte{0, 0xff, '\n'}},
				api.ExecEvent{Type: api.EventExit, Exit: &api.ExecResult{ExitCode: 137, Signal: "KILL", TimedOut: true, DurationMS: 12}},
			)
		case "fails":
			ndjson(w,
				api.ExecEvent{Type: api.EventStart, PID: 42},
				api.ExecEvent{Type: api.EventStdout, Data: []byte("partial")},
				api.ExecEvent{Type: api.EventError, Error: &api.ErrorBody{Code: api.CodeUnavailable, Message: "agent connection lost"}},
			)
		case "truncated":
			ndjson(w, api.ExecEvent{Type: api.EventStart, PID: 42}, api.ExecEvent{Type: api.EventStdout, Data: []byte("x")})
		case "missing":
			writeAPIError(w, http.StatusNotFound, api.CodeNotFound, "sandbox sb-1 not found")
		}
	})
	c := newTestClient(t, mux)
	sb := &Sandbox{Sandbox: api.Sandbox{ID: "sb-1"}, c: c}
	ctx := context.Background()

	var mu sync.Mutex
	var log []string
	res, err := sb.ExecStream(ctx, api.ExecRequest{Shell: "ok"}, orderedWriter{&mu, &log, "out"}, orderedWriter{&mu, &log, "err"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"out:out1\n", "err:err1\n", "out:\x00\xff\n"}
	if strings.Join(log, "|") != strings.Join(want, "|") {
		t.Errorf("writes = %q, want %q", log, want)
	}
	if res.ExitCode != 137 || !res.TimedOut || res.Signal != "KILL" {
		t.Errorf("result = %+v", res)
	}

	// nil writers are allowed.
	if _, err := sb.ExecStream(ctx, api.ExecRequest{Shell: "ok"}, nil, nil); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	_, err = sb.ExecStream(ctx, api.ExecRequest{Shell: "fails"}, &out, nil)
	var ae *APIError
	if !errors.As(err, &ae) || !errors.Is(err, ErrUnavailable) || ae.Message != "agent connection lost" || ae.StatusCode != 503 {
		t.Fatalf("error event: err = %#v", err)
	}
	if out.String() != "partial" {
		t.Errorf("output before the error = %q", out.String())
	}

	if _, err := sb.ExecStream(ctx, api.ExecRequest{Shell: "truncated"}, nil, nil); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated stream: err = %v", err)
	}
	if _, err := sb.ExecStream(ctx, api.ExecRequest{Shell: "missing"}, nil, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("error before stream: err = %v", err)
	}
}

func TestRunStream(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/run", func(w http.ResponseWriter, r *http.Request) {
		var req api.RunRequest
		json.NewDecoder(r.Body).Decode(&req)
		if req.Sandbox.Runtime != api.RuntimeRunc || req.Exec.Cmd[0] != "echo" {
			t.Errorf("request = %+v", req)
		}
		ndjson(w,
			api.ExecEvent{Type: api.EventStart, PID: 7, SandboxID: "sb-run"},
			api.ExecEvent{Type: api.EventStdout, Data: []byte("hi\n")},
			api.ExecEvent{Type: api.EventExit, Exit: &api.ExecResult{ExitCode: 3}},
		)
	})
	c := newTestClient(t, mux)
	var out bytes.Buffer
	res, err := c.RunStream(context.Background(), api.RunRequest{
		Sandbox: api.CreateSandboxRequest{Runtime: api.RuntimeRunc},
		Exec:    api.ExecRequest{Cmd: []string{"echo", "hi"}},
	}, &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.SandboxID != "sb-run" || res.ExitCode != 3 || out.String() != "hi\n" {
		t.Errorf("res = %+v, out = %q", res, out.String())
	}
}

func TestExecBuffered(t *testing.T) {
	var streamed bool
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/{id}/exec", func(w http.ResponseWriter, r *http.Request) {
		streamed = r.URL.Query().Get("stream") != "" || strings.Contains(r.Header.Get("Accept"), "ndjson")
		writeJSON(w, 200, api.ExecResult{Stdout: "a", Stderr: "b", ExitCode: 1})
	})
	c := newTestClient(t, mux)
	sb := &Sandbox{Sandbox: api.Sandbox{ID: "sb-1"}, c: c}
	res, err := sb.Exec(context.Background(), api.ExecRequest{Cmd: []string{"false"}})
	if err != nil || res.Stdout != "a" || res.Stderr != "b" || res.ExitCode != 1 {
		t.Fatalf("Exec = %+v, %v", res, err)
	}
	if streamed {
		t.Error("buffered exec asked for a stream")
	}
	// A daemon that answers a stream request with a buffered result still
	// gets its output to the writers.
	var out, errb bytes.Buffer
	res, err = sb.ExecStream(context.Background(), api.ExecRequest{Cmd: []string{"false"}}, &out, &errb)
	if err != nil || res.ExitCode != 1 || res.Stdout != "" || out.String() != "a" || errb.String() != "b" {
		t.Fatalf("ExecStream fallback = %+v, %v, out=%q err=%q", res, err, out.String(), errb.String())
	}
}

func TestDownload(t *testing.T) {
	content := bytes.Repeat([]byte("0123456789"), 10000)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/{id}/files", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("path") {
		case "/full":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Length", "100000")
			w.Write(content)
		case "/short":
			// Like the real server when the agent fails mid-transfer: the
			// headers promised more than is sent, then the connection is
			// aborted.
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Length", "100000")
			w.WriteHeader(200)
			w.Write(content[:50000])
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		default:
			writeAPIError(w, 404, api.CodeNotFound, "read "+r.URL.Query().Get("path")+": no such file")
		}
	})
	c := newTestClient(t, mux)
	sb := &Sandbox{Sandbox: api.Sandbox{ID: "sb-1"}, c: c}
	ctx := context.Background()

	var buf bytes.Buffer
	n, err := sb.Download(ctx, "/full", &buf)
	if err != nil || n != 100000 || !bytes.Equal(buf.Bytes(), content) {
		t.Fatalf("full download: n=%d err=%v", n, err)
	}

	buf.Reset()
	n, err = sb.Download(ctx, "/short", &buf)
	if err == nil {
		t.Fatal("short download succeeded")
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "of 100000 bytes") {
		t.Errorf("short download error = %v", err)
	}
	if n != int64(buf.Len()) || n >= 100000 {
		t.Errorf("short download n=%d, buffered %d", n, buf.Len())
	}

	if _, err := sb.Download(ctx, "/missing", &buf); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing file: err = %v", err)
	}
}

func TestUploadStreams(t *testing.T) {
	firstChunk := make(chan struct{})
	type upload struct {
		path, mode, body string
		contentLength    int64
	}
	uploads := make(chan upload, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /v1/sandboxes/{id}/files", func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 5)
		if _, err := io.ReadFull(r.Body, buf); err != nil {
			t.Error(err)
		}
		close(firstChunk) // only now does the test produce the rest
		rest, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
		}
		body := string(buf) + string(rest)
		uploads <- upload{r.URL.Query().Get("path"), r.URL.Query().Get("mode"), body, r.ContentLength}
		writeJSON(w, http.StatusCreated, api.UploadResult{Path: r.URL.Query().Get("path"), Size: int64(len(body))})
	})
	c := newTestClient(t, mux)
	sb := &Sandbox{Sandbox: api.Sandbox{ID: "sb-1"}, c: c}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte("first"))
		select {
		case <-firstChunk:
		case <-ctx.Done():
			pw.CloseWithError(errors.New("server never saw the first chunk: the body was buffered"))
			return
		}
		pw.Write([]byte(" second"))
		pw.Close()
	}()
	n, err := sb.Upload(ctx, "/home/user/f.txt", pr, 0o755|os.ModeSetuid)
	if err != nil {
		t.Fatal(err)
	}
	got := <-uploads
	if n != 12 || got.body != "first second" || got.path != "/home/user/f.txt" || got.mode != "4755" || got.contentLength != -1 {
		t.Errorf("n=%d upload=%+v", n, got)
	}

	// A regular file is sent with its length known.
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString("xxhello world")
	f.Seek(2, io.SeekStart)
	firstChunk = make(chan struct{})
	if n, err := sb.Upload(ctx, "/f", f, 0o600); err != nil || n != 11 {
		t.Fatalf("file upload: n=%d err=%v", n, err)
	}
	got = <-uploads
	if got.body != "hello world" || got.contentLength != 11 || got.mode != "0600" {
		t.Errorf("file upload = %+v", got)
	}
	if _, err := f.Stat(); err != nil {
		t.Errorf("Upload closed the caller's file: %v", err)
	}
}

func TestBuildTemplate(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/templates/{name}/build", func(w http.ResponseWriter, r *http.Request) {
		var req api.BuildTemplateRequest
		json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		enc.Encode(api.TemplateBuildEvent{Type: "log", Line: "step 1"})
		enc.Encode(api.TemplateBuildEvent{Type: "log", Line: "step 2"})
		if r.PathValue("name") == "bad" {
			enc.Encode(api.TemplateBuildEvent{Type: "error", Error: &api.ErrorBody{Code: api.CodeInvalidArgument, Message: "unknown template bad"}})
			return
		}
		enc.Encode(api.TemplateBuildEvent{Type: "done", Template: &api.Template{Name: r.PathValue("name"), Builder: map[bool]string{true: "forced", false: "cached"}[req.Force]}})
	})
	c := newTestClient(t, mux)
	var progress bytes.Buffer
	tpl, err := c.BuildTemplate(context.Background(), "base", true, &progress)
	if err != nil {
		t.Fatal(err)
	}
	if tpl.Name != "base" || tpl.Builder != "forced" || progress.String() != "step 1\nstep 2\n" {
		t.Errorf("tpl=%+v progress=%q", tpl, progress.String())
	}
	if _, err := c.BuildTemplate(context.Background(), "bad", false, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("err = %v", err)
	}
}
