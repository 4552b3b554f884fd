package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockdev/airlock/api"
)

// fakeDaemon imitates the few API responses the command tests need.
func fakeDaemon(t *testing.T) (string, *[]api.ExecRequest) {
	t.Helper()
	var execs []api.ExecRequest
	mux := http.NewServeMux()
	writeJSON := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /v1/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != "sb-1" {
			writeJSON(w, 404, api.ErrorResponse{Error: api.ErrorBody{Code: api.CodeNotFound, Message: "sandbox " + r.PathValue("id") + " not found"}})
			return
		}
		writeJSON(w, 200, api.Sandbox{ID: "sb-1", State: api.StateRunning})
	})
	mux.HandleFunc("POST /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 201, api.Sandbox{ID: "sb-new"})
	})
	mux.HandleFunc("POST /v1/sandboxes/{id}/exec", func(w http.ResponseWriter, r *http.Request) {
		var req api.ExecRequest
		json.NewDecoder(r.Body).Decode(&req)
		execs = append(execs, req)
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		enc.Encode(api.ExecEvent{Type: api.EventStart, PID: 9})
		enc.Encode(api.ExecEvent{Type: api.EventStdout, Data: []byte("out\n")})
		enc.Encode(api.ExecEvent{Type: api.EventStderr, Data: []byte("err\n")})
		res := api.ExecResult{ExitCode: 3}
		if req.TimeoutSeconds == 1 {
			res = api.ExecResult{ExitCode: 137, Signal: "KILL", TimedOut: true}
		}
		enc.Encode(api.ExecEvent{Type: api.EventExit, Exit: &res})
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/files/stat", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, api.FileInfo{Name: "out.txt", Path: r.URL.Query().Get("path"), Type: "file", Size: 5, Mode: 0o640})
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/files", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5")
		w.Write([]byte("hello"))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL, &execs
}

func runCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestExecCommand(t *testing.T) {
	host, execs := fakeDaemon(t)
	for _, tc := range []struct {
		name string
		args []string
		want api.ExecRequest
	}{
		{"plain", []string{"sb-1", "python3", "-c", "print(1)", "--flag"}, api.ExecRequest{Cmd: []string{"python3", "-c", "print(1)", "--flag"}}},
		{"dash dash", []string{"--cwd", "/tmp", "-e", "A=1", "sb-1", "--", "ls", "-la"}, api.ExecRequest{Cmd: []string{"ls", "-la"}, Cwd: "/tmp", Env: map[string]string{"A": "1"}}},
		{"shell", []string{"--shell", "--user", "root", "sb-1", "echo", "$HOME", "|", "wc"}, api.ExecRequest{Shell: "echo $HOME | wc", User: "root"}},
		{"stdin", []string{"-i", "--timeout", "2m", "sb-1", "cat"}, api.ExecRequest{Cmd: []string{"cat"}, Stdin: []byte("input"), TimeoutSeconds: 120}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			*execs = nil
			code, out, errOut := runCLI(t, "input", append([]string{"--host", host, "exec"}, tc.args...)...)
			if code != 3 || out != "out\n" || errOut != "err\n" {
				t.Errorf("code=%d stdout=%q stderr=%q", code, out, errOut)
			}
			if len(*execs) != 1 {
				t.Fatalf("%d exec requests", len(*execs))
			}
			got, _ := json.Marshal((*execs)[0])
			want, _ := json.Marshal(tc.want)
			if string(got) != string(want) {
				t.Errorf("request %s, want %s", got, want)
			}
		})
	}

	code, _, errOut := runCLI(t, "", "--host", host, "exec", "--timeout", "1", "sb-1", "sleep", "9")
	if code != 137 || !strings.Contains(errOut, "airlock: command timed out") {
		t.Errorf("timeout: code=%d stderr=%q", code, errOut)
	}
	code, _, errOut = runCLI(t, "", "--host", host, "exec", "sb-missing", "true")
	if code != 1 || errOut != "airlock: sandbox sb-missing not found\n" {
		t.Errorf("missing sandbox: code=%d stderr=%q", code, errOut)
	}
	code, _, errOut = runCLI(t, "", "--host", host, "exec", "--env", "BAD", "sb-1", "true")
	if code != 2 || !strings.Contains(errOut, `"BAD"`) {
		t.Errorf("bad --env: code=%d stderr=%q", code, errOut)
	}
	code, _, errOut = runCLI(t, "", "--host", host, "exec", "sb-1", "--")
	if code != 2 || !strings.Contains(errOut, "no command") {
		t.Errorf("no command: code=%d stderr=%q", code, errOut)
	}
}

func TestCreateAndCpCommands(t *testing.T) {
	host, _ := fakeDaemon(t)
	code, out, errOut := runCLI(t, "", "--host", host, "create", "--label", "a=b", "--timeout", "30m")
	if code != 0 || out != "sb-new\n" || errOut != "" {
		t.Errorf("create: code=%d stdout=%q stderr=%q", code, out, errOut)
	}

	dir := t.TempDir()
	code, out, errOut = runCLI(t, "", "--host", host, "cp", "sb-1:/home/user/out.txt", dir)
	if code != 0 || out != "" || errOut != "" {
		t.Fatalf("cp: code=%d stdout=%q stderr=%q", code, out, errOut)
	}
	b, err := os.ReadFile(filepath.Join(dir, "out.txt"))
	fi, _ := os.Stat(filepath.Join(dir, "out.txt"))
	if err != nil || string(b) != "hello" || fi.Mode().Perm() != 0o640 {
		t.Errorf("downloaded %q, %v, mode %v", b, err, fi.Mode())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary files left behind: %v", ents)
	}
	code, out, _ = runCLI(t, "", "--host", host, "cp", "sb-1:/home/user/out.txt", "-")
	if code != 0 || out != "hello" {
		t.Errorf("cp to stdout: code=%d stdout=%q", code, out)
	}
	code, _, errOut = runCLI(t, "", "--host", host, "cp", "a", "b")
	if code != 2 || !strings.Contains(errOut, "ID:/path") {
		t.Errorf("local-to-local cp: code=%d stderr=%q", code, errOut)
	}
}

func TestFormat(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ got, want string }{
		{ago(now.Add(-2*time.Minute-10*time.Second), now), "2m ago"},
		{ago(now.Add(-30*time.Second), now), "30s ago"},
		{ago(now.Add(-(2*time.Hour + 5*time.Minute)), now), "2h5m ago"},
		{ago(now.Add(-72*time.Hour), now), "3d ago"},
		{ago(time.Time{}, now), "-"},
		{expiresIn(now.Add(13*time.Minute+5*time.Second), now), "in 13m"},
		{expiresIn(now.Add(9*time.Minute+58*time.Second), now), "in 10m"},
		{expiresIn(now.Add(59*time.Minute+50*time.Second), now), "in 1h"},
		{expiresIn(now.Add(59*time.Second+600*time.Millisecond), now), "in 1m"},
		{expiresIn(now.Add(-time.Second), now), "expired"},
		{formatLabels(map[string]string{"b": "2", "a": "1"}), "a=1,b=2"},
		{humanMB(312_400_000), "312 MB"},
		{humanMB(1_500_000), "1.5 MB"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
