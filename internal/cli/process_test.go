package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/airlockdev/airlock/api"
)

// fakeProcessDaemon imitates the process routes the commands use.
func fakeProcessDaemon(t *testing.T) (string, *[]string) {
	t.Helper()
	var calls []string
	three := 3
	started := time.Now().Add(-time.Minute)
	procs := []api.Process{
		{PID: 7, Tag: "web", Cmd: []string{"python3", "-m", "http.server"}, Running: true, StartedAt: started},
		{PID: 9, Cmd: []string{"sh", "-c", "exit 3"}, ExitCode: &three, StartedAt: started},
	}
	writeJSON := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, api.Sandbox{ID: r.PathValue("id"), State: api.StateRunning})
	})
	mux.HandleFunc("POST /v1/sandboxes/{id}/processes", func(w http.ResponseWriter, r *http.Request) {
		var req api.StartProcessRequest
		json.NewDecoder(r.Body).Decode(&req)
		b, _ := json.Marshal(req)
		calls = append(calls, "start "+string(b))
		writeJSON(w, 201, api.Process{PID: 42, Tag: req.Tag, Cmd: req.Cmd, Running: true})
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/processes", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, api.ProcessList{Processes: procs})
	})
	mux.HandleFunc("GET /v1/sandboxes/{id}/processes/{sel}/output", func(w http.ResponseWriter, r *http.Request) {
		calls = append(calls, "output "+r.PathValue("sel")+" follow="+r.URL.Query().Get("follow"))
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		enc.Encode(api.ProcessEvent{Type: api.EventStart, Process: &procs[1]})
		enc.Encode(api.ProcessEvent{Type: api.EventStdout, Data: []byte("out\n")})
		enc.Encode(api.ProcessEvent{Type: api.EventStderr, Data: []byte("err\n")})
		enc.Encode(api.ProcessEvent{Type: api.EventExit, Process: &procs[1]})
	})
	mux.HandleFunc("POST /v1/sandboxes/{id}/processes/{sel}/signal", func(w http.ResponseWriter, r *http.Request) {
		var req api.SignalRequest
		json.NewDecoder(r.Body).Decode(&req)
		calls = append(calls, "signal "+r.PathValue("sel")+" "+req.Signal)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("DELETE /v1/sandboxes/{id}/processes/{sel}", func(w http.ResponseWriter, r *http.Request) {
		calls = append(calls, "kill "+r.PathValue("sel"))
		writeJSON(w, 200, procs[1])
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL, &calls
}

func TestProcessCommands(t *testing.T) {
	host, calls := fakeProcessDaemon(t)
	for _, tc := range []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string // substrings
		call           string
	}{
		{name: "exec detach", args: []string{"exec", "-d", "--tag", "web", "-e", "A=1", "sb-1", "--", "python3", "-m", "http.server"},
			stdout: "42\n", call: `start {"cmd":["python3","-m","http.server"],"env":{"A":"1"},"tag":"web"}`},
		{name: "tag without detach", args: []string{"exec", "--tag", "web", "sb-1", "true"}, code: 2, stderr: "--tag needs --detach"},
		{name: "detach with stdin", args: []string{"exec", "-d", "-i", "sb-1", "cat"}, code: 2, stderr: "--stdin cannot be combined"},
		{name: "ps", args: []string{"ps", "sb-1"}, stdout: "web   running      1m ago    python3 -m http.server"},
		{name: "ps exited", args: []string{"ps", "sb-1"}, stdout: "exited (3)"},
		{name: "attach", args: []string{"attach", "sb-1", "9"}, code: 3, stdout: "out\n", stderr: "err\n", call: "output 9 follow="},
		{name: "attach no follow", args: []string{"attach", "--no-follow", "sb-1", "web"}, code: 3, call: "output web follow=false"},
		{name: "kill", args: []string{"kill", "sb-1", "web"}, call: "kill web"},
		{name: "signal", args: []string{"kill", "-s", "INT", "sb-1", "7"}, call: "signal 7 INT"},
		{name: "shell needs a terminal", args: []string{"shell", "sb-1"}, code: 2, stderr: "the input is not a terminal"},
		{name: "shell attach with command", args: []string{"shell", "--attach", "7", "sb-1", "--", "sh"}, code: 2, stderr: "--attach cannot be combined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			*calls = nil
			code, out, errOut := runCLI(t, "", append([]string{"--host", host}, tc.args...)...)
			if code != tc.code || !strings.Contains(out, tc.stdout) || !strings.Contains(errOut, tc.stderr) {
				t.Errorf("code=%d stdout=%q stderr=%q, want %d and %q %q", code, out, errOut, tc.code, tc.stdout, tc.stderr)
			}
			if tc.call != "" && (len(*calls) != 1 || (*calls)[0] != tc.call) {
				t.Errorf("calls %q, want [%q]", *calls, tc.call)
			}
		})
	}
}
