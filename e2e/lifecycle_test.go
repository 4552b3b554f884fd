package e2e

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/client"
)

func TestDeleteLeavesNothing(t *testing.T) {
	d := startDaemon(t, "")
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			ctx := testCtx(t, time.Minute)
			sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt})
			if _, err := sb.Exec(ctx, api.ExecRequest{Shell: "sleep 1000 & echo x > /tmp/x"}); err != nil {
				t.Fatal(err)
			}
			if len(cgroupsOf(sb.ID)) == 0 {
				t.Error("sandbox has no cgroup while running")
			}
			if err := d.client.DeleteSandbox(ctx, sb.ID); err != nil {
				t.Fatal(err)
			}
			if err := d.client.DeleteSandbox(ctx, sb.ID); err != nil {
				t.Errorf("second delete: %v", err)
			}
			if _, err := d.client.Sandbox(ctx, sb.ID); !errors.Is(err, client.ErrNotFound) {
				t.Errorf("get deleted: %v, want ErrNotFound", err)
			}
			if ps := processesMentioning(sb.ID); len(ps) > 0 {
				t.Errorf("processes left: %v", ps)
			}
			if ms := mountsUnder(filepath.Join(d.dataDir, "drivers", rt, "sandboxes", sb.ID)); len(ms) > 0 {
				t.Errorf("mounts left: %v", ms)
			}
			if cg := cgroupsOf(sb.ID); len(cg) > 0 {
				t.Errorf("cgroups left: %v", cg)
			}
			if _, err := os.Stat(filepath.Join(d.dataDir, "drivers", rt, "sandboxes", sb.ID)); !os.IsNotExist(err) {
				t.Errorf("bundle directory left: %v", err)
			}
		})
	}
}

func TestDaemonKill9Restart(t *testing.T) {
	rts := runtimes(t)
	dataDir := t.TempDir()
	d := startDaemon(t, dataDir)
	ctx := testCtx(t, 3*time.Minute)
	kept := map[string]string{}
	for _, rt := range rts {
		sb, err := d.client.CreateSandbox(ctx, api.CreateSandboxRequest{Runtime: rt, Template: "busybox"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sb.Exec(ctx, api.ExecRequest{Shell: "echo before > /tmp/state"}); err != nil {
			t.Fatal(err)
		}
		kept[sb.ID] = rt
	}
	// One more sandbox whose container dies while the daemon is down: it
	// must be reclaimed, not left as a zombie record.
	dead, err := d.client.CreateSandbox(ctx, api.CreateSandboxRequest{Runtime: rts[0], Template: "busybox"})
	if err != nil {
		t.Fatal(err)
	}
	d.kill9()
	bin := map[string]string{api.RuntimeGVisor: "runsc", api.RuntimeRunc: "runc"}[rts[0]]
	state := filepath.Join(dataDir, "drivers", rts[0], "state")
	if out, err := exec.Command(bin, "--root", state, "kill", "airlock-"+dead.ID, "KILL").CombinedOutput(); err != nil {
		t.Logf("kill container: %v %s", err, out)
	}
	// The precondition is a container that died while no daemon watched:
	// wait until the runtime itself says so.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, _ := exec.Command(bin, "--root", state, "state", "airlock-"+dead.ID).Output()
		if !strings.Contains(string(out), `"running"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s still running after kill", dead.ID)
		}
	}

	d2 := startDaemon(t, dataDir)
	t.Cleanup(d2.cleanupRunning)
	for id, rt := range kept {
		sb, err := d2.client.Sandbox(ctx, id)
		if err != nil {
			t.Fatalf("%s sandbox %s not re-adopted: %v\n%s", rt, id, err, d2.logs())
		}
		res, err := sb.Exec(ctx, api.ExecRequest{Shell: "cat /tmp/state"})
		if err != nil || res.Stdout != "before\n" {
			t.Errorf("%s exec after restart: %+v %v", rt, res, err)
		}
	}
	if _, err := d2.client.Sandbox(ctx, dead.ID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("dead sandbox not reclaimed: %v", err)
	}
	if ms := mountsUnder(filepath.Join(dataDir, "drivers", rts[0], "sandboxes", dead.ID)); len(ms) > 0 {
		t.Errorf("dead sandbox mounts left: %v", ms)
	}
}

func TestSecondDaemonRefused(t *testing.T) {
	d := startDaemon(t, "")
	cmd := exec.Command(filepath.Join(binDir, "airlock"), "serve", "--listen", freeAddr(t), "--data", d.dataDir, "--templates", templatesDir, "--no-build")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatal("second daemon on the same data directory started")
	}
	if !strings.Contains(string(out), "in use by another airlock daemon") {
		t.Errorf("unclear refusal: %s", out)
	}
}

func TestSandboxTTL(t *testing.T) {
	d := startDaemon(t, "")
	rt := runtimes(t)[0]
	ctx := testCtx(t, time.Minute)
	sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt, TimeoutSeconds: 2})
	extended := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt, TimeoutSeconds: 2})
	if err := extended.SetTimeout(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := d.client.Sandbox(ctx, sb.ID)
		if errors.Is(err, client.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox still there after its TTL: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := d.client.Sandbox(ctx, extended.ID); err != nil {
		t.Errorf("extended sandbox gone: %v", err)
	}
	// The record goes first; give the runtime a moment to finish tearing
	// the sandbox down.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ps := processesMentioning(sb.ID)
		if len(ps) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("expired sandbox left processes: %v", ps)
		}
	}
}

func TestAPIErrors(t *testing.T) {
	d := startDaemon(t, "")
	base := "http://" + d.addr
	cases := []struct {
		method, path, body string
		status             int
		code, mention      string
	}{
		{"POST", "/v1/sandboxes", "{bad json", 400, api.CodeInvalidArgument, "invalid JSON"},
		{"POST", "/v1/sandboxes", `{"runtime":"docker"}`, 400, api.CodeInvalidArgument, "runtime"},
		{"POST", "/v1/sandboxes", `{"memory_mb":999999999}`, 400, api.CodeInvalidArgument, "memory_mb"},
		{"POST", "/v1/sandboxes", `{"template":"nope"}`, 404, api.CodeNotFound, "nope"},
		{"POST", "/v1/sandboxes", `{"unknown_field":1}`, 400, api.CodeInvalidArgument, "unknown_field"},
		{"GET", "/v1/sandboxes/sb-doesnotexist", "", 404, api.CodeNotFound, "sb-doesnotexist"},
		{"POST", "/v1/sandboxes/sb-doesnotexist/exec", `{"cmd":["true"]}`, 404, api.CodeNotFound, "sb-doesnotexist"},
		{"GET", "/v1/sandboxes?label=novalue", "", 400, api.CodeInvalidArgument, "label"},
		{"GET", "/v1/nothing-here", "", 404, api.CodeNotFound, "no route"},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body api.ErrorResponse
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || body.Error.Code != tc.code || !strings.Contains(body.Error.Message, tc.mention) {
			t.Errorf("%s %s: %d %+v; want %d %s mentioning %q", tc.method, tc.path, resp.StatusCode, body.Error, tc.status, tc.code, tc.mention)
		}
	}
	sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: runtimes(t)[0]})
	ctx := testCtx(t, time.Minute)
	for _, req := range []api.ExecRequest{{}, {Cmd: []string{"true"}, Shell: "true"}, {Cmd: []string{"true"}, Cwd: "relative"}, {Cmd: []string{"true"}, TimeoutSeconds: -1}} {
		if _, err := sb.Exec(ctx, req); !errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("exec %+v: %v, want ErrInvalidArgument", req, err)
		}
	}
}

// TestRuntimeDeathReported: a sandbox whose runtime dies under a running
// daemon fails execs at once with a clear error, is listed as stopped, and
// can still be deleted.
func TestRuntimeDeathReported(t *testing.T) {
	d := startDaemon(t, "")
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			ctx := testCtx(t, time.Minute)
			sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt})
			bin := map[string]string{api.RuntimeGVisor: "runsc", api.RuntimeRunc: "runc"}[rt]
			state := filepath.Join(d.dataDir, "drivers", rt, "state")
			if out, err := exec.Command(bin, "--root", state, "kill", "airlock-"+sb.ID, "KILL").CombinedOutput(); err != nil {
				t.Fatalf("kill container: %v %s", err, out)
			}
			var err error
			for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				if _, err = sb.Exec(ctx, api.ExecRequest{Cmd: []string{"true"}}); err != nil && strings.Contains(err.Error(), "not running") {
					break
				}
			}
			if err == nil || !strings.Contains(err.Error(), "not running") {
				t.Fatalf("exec in a dead sandbox: %v, want a 'not running' error", err)
			}
			got, err := d.client.Sandbox(ctx, sb.ID)
			if err != nil || got.State != api.StateStopped {
				t.Errorf("dead sandbox: state %q %v, want stopped", got.State, err)
			}
			if err := d.client.DeleteSandbox(ctx, sb.ID); err != nil {
				t.Errorf("delete dead sandbox: %v", err)
			}
		})
	}
}
