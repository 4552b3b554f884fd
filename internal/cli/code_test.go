package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockdev/airlock/api"
)

// fakeCodeDaemon answers runs: "fail" raises, anything else prints,
// displays an image and returns a value. It records the requests.
func fakeCodeDaemon(t *testing.T) (string, *[]api.RunCodeRequest) {
	t.Helper()
	var reqs []api.RunCodeRequest
	image := []byte("\x89PNG fake")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(api.Sandbox{ID: r.PathValue("id")})
	})
	mux.HandleFunc("POST /v1/sandboxes/{id}/code", func(w http.ResponseWriter, r *http.Request) {
		var req api.RunCodeRequest
		json.NewDecoder(r.Body).Decode(&req)
		reqs = append(reqs, req)
		res := api.CodeResult{ContextID: "default-python", ExecutionCount: 3, Results: []api.CodeOutput{}}
		if req.Code == "fail" {
			res.Error = &api.CodeError{Name: "ValueError", Value: "bad", Traceback: "Traceback...\nValueError: bad\n"}
		} else {
			res.Stdout = "printed\n"
			res.Results = []api.CodeOutput{{Text: "<Figure>", PNG: image}, {Text: "42", IsMainResult: true}}
		}
		if r.URL.Query().Get("stream") != "ndjson" {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(res)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		enc.Encode(api.CodeEvent{Type: api.EventStart, ContextID: res.ContextID})
		if res.Stdout != "" {
			enc.Encode(api.CodeEvent{Type: api.EventStdout, Data: []byte(res.Stdout)})
		}
		for _, o := range res.Results {
			enc.Encode(api.CodeEvent{Type: api.EventResult, Result: &o})
		}
		if res.Error != nil {
			enc.Encode(api.CodeEvent{Type: api.EventError, Error: res.Error})
		}
		end := res
		end.Stdout, end.Results = "", []api.CodeOutput{}
		enc.Encode(api.CodeEvent{Type: api.EventEnd, End: &end})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL, &reqs
}

func TestCodeCommand(t *testing.T) {
	host, reqs := fakeCodeDaemon(t)
	dir := t.TempDir()
	tests := []struct {
		name       string
		stdin      string
		args       []string
		code       int
		out, err   string
		wantReq    api.RunCodeRequest
		savedImage bool
	}{
		{name: "streamed", args: []string{"sb-1", "x"}, out: "printed\n<Figure> [image/png, 9 bytes: use --save-images DIR or --json]\n42\n",
			wantReq: api.RunCodeRequest{Code: "x"}},
		{name: "flags", args: []string{"--lang", "js", "--context", "ctx-1", "--timeout", "5s", "-e", "A=1", "sb-1", "1"},
			out:     "printed\n<Figure> [image/png, 9 bytes: use --save-images DIR or --json]\n42\n",
			wantReq: api.RunCodeRequest{Code: "1", Language: "js", ContextID: "ctx-1", TimeoutSeconds: 5, Env: map[string]string{"A": "1"}}},
		{name: "stdin", stdin: "from\nstdin", args: []string{"sb-1", "-"}, out: "printed\n<Figure> [image/png, 9 bytes: use --save-images DIR or --json]\n42\n",
			wantReq: api.RunCodeRequest{Code: "from\nstdin"}},
		{name: "error", args: []string{"sb-1", "fail"}, code: 1, err: "Traceback...\nValueError: bad\n",
			wantReq: api.RunCodeRequest{Code: "fail"}},
		{name: "save images", args: []string{"--save-images", dir, "sb-1", "x"},
			out: "printed\n" + filepath.Join(dir, "default-python-3-1.png") + "\n42\n", wantReq: api.RunCodeRequest{Code: "x"}, savedImage: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			*reqs = nil
			code, out, errOut := runCLI(t, tt.stdin, append([]string{"--host", host, "code"}, tt.args...)...)
			if code != tt.code || out != tt.out || errOut != tt.err {
				t.Errorf("got %d %q %q, want %d %q %q", code, out, errOut, tt.code, tt.out, tt.err)
			}
			if len(*reqs) != 1 {
				t.Fatalf("requests %+v", *reqs)
			}
			got, _ := json.Marshal((*reqs)[0])
			want, _ := json.Marshal(tt.wantReq)
			if string(got) != string(want) {
				t.Errorf("request %s, want %s", got, want)
			}
			if tt.savedImage {
				if b, err := os.ReadFile(filepath.Join(dir, "default-python-3-1.png")); err != nil || string(b) != "\x89PNG fake" {
					t.Errorf("saved image: %q %v", b, err)
				}
			}
		})
	}
}

func TestCodeCommandJSON(t *testing.T) {
	host, _ := fakeCodeDaemon(t)
	code, out, _ := runCLI(t, "", "--host", host, "code", "--json", "sb-1", "x")
	var res api.CodeResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 {
		t.Fatalf("%d %q: %v", code, out, err)
	}
	if res.Stdout != "printed\n" || len(res.Results) != 2 || string(res.Results[0].PNG) != "\x89PNG fake" ||
		!strings.Contains(out, `"image/png": "iVBORyBmYWtl"`) {
		t.Errorf("result %s", out)
	}
}

func TestCodeUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"code", "sb-1"},
		{"run", "--lang", "python", "--cwd", "/tmp", "1"},
		{"run", "--lang", "python"},
		{"context", "restart", "sb-1"},
	} {
		code, _, errOut := runCLI(t, "", append([]string{"--host", "http://127.0.0.1:1"}, args...)...)
		if code != 2 || !strings.Contains(errOut, "--help") {
			t.Errorf("%q: %d %q", args, code, errOut)
		}
	}
}
