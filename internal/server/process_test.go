package server

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/errdefs"
)

func TestProcessSelector(t *testing.T) {
	for _, tc := range []struct {
		sel     string
		pid     int
		tag     string
		invalid bool
	}{
		{sel: "42", pid: 42},
		{sel: "web", tag: "web"},
		{sel: "1abc", tag: "1abc"},
		{sel: "0", invalid: true},
		{sel: "", invalid: true},
		{sel: "99999999999999999999999", invalid: true},
	} {
		pid, tag, err := processSelector(tc.sel)
		if tc.invalid {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("%q: err %v, want invalid argument", tc.sel, err)
			}
			continue
		}
		if err != nil || pid != tc.pid || tag != tc.tag {
			t.Errorf("%q = %d %q %v, want %d %q", tc.sel, pid, tag, err, tc.pid, tc.tag)
		}
	}
}

func TestPTYRequest(t *testing.T) {
	for _, tc := range []struct {
		name    string
		query   string
		start   *api.StartProcessRequest
		attach  string
		size    api.PTYSize
		invalid bool
	}{
		{name: "login shell", query: "", start: &api.StartProcessRequest{PTY: &api.PTYSize{}}},
		{
			name:  "command and options",
			query: "cmd=python3&cmd=-q&cols=120&rows=40&tag=repl&user=root&cwd=/tmp&env=A=1&env=B=x=y",
			start: &api.StartProcessRequest{
				Cmd: []string{"python3", "-q"}, Tag: "repl", User: "root", Cwd: "/tmp",
				Env: map[string]string{"A": "1", "B": "x=y"}, PTY: &api.PTYSize{Cols: 120, Rows: 40},
			},
			size: api.PTYSize{Cols: 120, Rows: 40},
		},
		{name: "attach", query: "attach=repl&cols=80&rows=24", attach: "repl", size: api.PTYSize{Cols: 80, Rows: 24}},
		{name: "attach with cmd", query: "attach=1&cmd=sh", invalid: true},
		{name: "bad cols", query: "cols=0", invalid: true},
		{name: "huge rows", query: "rows=100000", invalid: true},
		{name: "bad env", query: "env=NOVALUE", invalid: true},
		{name: "unknown parameter", query: "colz=80", invalid: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/v1/sandboxes/x/pty?"+tc.query, nil)
			start, attach, size, err := ptyRequest(r)
			if tc.invalid {
				if !errors.Is(err, errdefs.ErrInvalidArgument) {
					t.Errorf("err %v, want invalid argument", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(start, tc.start) || attach != tc.attach || size != tc.size {
				t.Errorf("got %+v %q %+v, want %+v %q %+v", start, attach, size, tc.start, tc.attach, tc.size)
			}
		})
	}
}

func TestPTYNeedsUpgrade(t *testing.T) {
	s := New(nil, nil, nil)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/sandboxes/x/pty", nil))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("plain GET of the PTY route: %d %s, want 400", rec.Code, rec.Body)
	}
}
