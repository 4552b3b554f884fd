package sandbox

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/errdefs"
)

func TestResolve(t *testing.T) {
	cfg := Config{MaxCPUs: 2}.withDefaults()
	ok := func(req api.CreateSandboxRequest, check func(api.Sandbox) string) {
		t.Helper()
		sb, err := cfg.resolve(req)
		if err != nil {
			t.Errorf("%+v: %v", req, err)
			return
		}
		if msg := check(sb); msg != "" {
			t.Errorf("%+v: %s", req, msg)
		}
	}
	ok(api.CreateSandboxRequest{}, func(sb api.Sandbox) string {
		if sb.Runtime != api.RuntimeGVisor || sb.Template != "base" || sb.CPUs != 1 || sb.MemoryMB != 512 ||
			sb.TimeoutSeconds != 900 || sb.PidsLimit != 1024 || sb.DiskMB != 2048 {
			return fmt.Sprintf("defaults not applied: %+v", sb)
		}
		return ""
	})
	ok(api.CreateSandboxRequest{Runtime: "runc", CPUs: 0.5, MemoryMB: 64, TimeoutSeconds: 30}, func(sb api.Sandbox) string {
		if sb.Runtime != "runc" || sb.CPUs != 0.5 || sb.MemoryMB != 64 || sb.TimeoutSeconds != 30 {
			return "request values not kept"
		}
		return ""
	})

	bad := []struct {
		req     api.CreateSandboxRequest
		mention string
	}{
		{api.CreateSandboxRequest{Runtime: "docker"}, "runtime"},
		{api.CreateSandboxRequest{CPUs: 3}, "cpus"},
		{api.CreateSandboxRequest{CPUs: -1}, "cpus"},
		{api.CreateSandboxRequest{MemoryMB: 8}, "memory_mb"},
		{api.CreateSandboxRequest{MemoryMB: 1 << 30}, "memory_mb"},
		{api.CreateSandboxRequest{DiskMB: 1}, "disk_mb"},
		{api.CreateSandboxRequest{PidsLimit: 8}, "pids_limit"},
		{api.CreateSandboxRequest{PidsLimit: 1 << 20}, "pids_limit"},
		{api.CreateSandboxRequest{TimeoutSeconds: -5}, "timeout_seconds"},
		{api.CreateSandboxRequest{TimeoutSeconds: int64(48 * time.Hour / time.Second)}, "timeout_seconds"},
		{api.CreateSandboxRequest{Env: map[string]string{"1BAD": "x"}}, "env name"},
		{api.CreateSandboxRequest{Env: map[string]string{"A=B": "x"}}, "env name"},
		{api.CreateSandboxRequest{Labels: map[string]string{"bad key!": "x"}}, "label key"},
		{api.CreateSandboxRequest{Labels: map[string]string{"k": strings.Repeat("v", 300)}}, "longer than"},
	}
	for _, tc := range bad {
		_, err := cfg.resolve(tc.req)
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%+v: got %v, want invalid argument mentioning %q", tc.req, err, tc.mention)
		}
	}
}

func TestExecRequest(t *testing.T) {
	m := &Manager{cfg: Config{}.withDefaults()}
	sb := api.Sandbox{Env: map[string]string{"A": "sandbox", "B": "b"}}
	req, err := m.execRequest(sb, api.ExecRequest{Shell: "echo hi", Env: map[string]string{"A": "exec"}, TimeoutSeconds: 1.5})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(req.Argv, "|") != "/bin/sh|-c|echo hi" || strings.Join(req.Env, ",") != "A=exec,B=b" || req.TimeoutMS != 1500 {
		t.Errorf("got %+v", req)
	}
	if req, _ := m.execRequest(sb, api.ExecRequest{Cmd: []string{"true"}}); req.TimeoutMS != m.cfg.DefaultExecTimeout.Milliseconds() {
		t.Errorf("default exec timeout not applied: %d", req.TimeoutMS)
	}
	for _, bad := range []api.ExecRequest{
		{},
		{Cmd: []string{"a"}, Shell: "b"},
		{Cmd: []string{""}},
		{Cmd: []string{"a"}, Cwd: "rel"},
		{Cmd: []string{"a"}, TimeoutSeconds: -1},
		{Cmd: []string{"a"}, TimeoutSeconds: 1e9},
		{Cmd: []string{"a"}, Env: map[string]string{"": "x"}},
	} {
		if _, err := m.execRequest(sb, bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%+v: %v, want invalid argument", bad, err)
		}
	}
}

func TestCapBuffer(t *testing.T) {
	cases := []struct {
		limit     int64
		writes    []string
		want      string
		truncated bool
	}{
		{10, []string{"hello"}, "hello", false},
		{5, []string{"hello"}, "hello", false},
		{4, []string{"hello"}, "hell", true},
		{6, []string{"abc", "def", "g"}, "abcdef", true},
		{0, []string{"x"}, "", true},
		{3, []string{"", "ab"}, "ab", false},
	}
	for _, tc := range cases {
		b := &CapBuffer{Limit: tc.limit}
		for _, w := range tc.writes {
			if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
				t.Fatalf("write %q: %d %v", w, n, err)
			}
		}
		if b.String() != tc.want || b.Truncated != tc.truncated {
			t.Errorf("limit %d writes %q: got %q truncated=%v", tc.limit, tc.writes, b.String(), b.Truncated)
		}
	}
}
