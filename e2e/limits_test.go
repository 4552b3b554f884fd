package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/client"
)

// TestLimitsRefused checks requests above the operator's maximums are
// refused with a 400 naming the field.
func TestLimitsRefused(t *testing.T) {
	d := startDaemon(t, "")
	ctx := testCtx(t, time.Minute)
	for _, tc := range []struct {
		req   api.CreateSandboxRequest
		field string
	}{
		{api.CreateSandboxRequest{PidsLimit: 1 << 20}, "pids_limit"},
		{api.CreateSandboxRequest{PidsLimit: 4}, "pids_limit"},
		{api.CreateSandboxRequest{MemoryMB: 1 << 30}, "memory_mb"},
		{api.CreateSandboxRequest{DiskMB: 1 << 30}, "disk_mb"},
		{api.CreateSandboxRequest{CPUs: 1000}, "cpus"},
		{api.CreateSandboxRequest{TimeoutSeconds: 1 << 40}, "timeout_seconds"},
	} {
		tc.req.Template = "busybox"
		_, err := d.client.CreateSandbox(ctx, tc.req)
		var apiErr *client.APIError
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: got %v, want a 400 naming %s", tc.req, err, tc.field)
		}
	}
	sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: runtimes(t)[0]})
	var out countingWriter
	_, err := sb.ExecStream(ctx, api.ExecRequest{Cmd: []string{"true"}, MaxOutputBytes: 1 << 40}, &out, &out)
	if !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), "max_output_bytes") {
		t.Errorf("streamed exec with max_output_bytes 1 TiB: %v, want invalid argument naming max_output_bytes", err)
	}
}

// TestLimitsEnforced checks the limits a sandbox gets are the ones asked
// for, from inside (open files, processes) and from the host (CPU quota,
// pids).
func TestLimitsEnforced(t *testing.T) {
	d := startDaemon(t, "")
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt, CPUs: 0.5, PidsLimit: 100})
			ctx := testCtx(t, time.Minute)

			// Open files: RLIMIT_NOFILE, tested by opening past it.
			res, err := sb.Exec(ctx, api.ExecRequest{Shell: "ulimit -n"})
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := strconv.Atoi(strings.TrimSpace(res.Stdout)); n <= 0 || n > 65536 {
				t.Errorf("RLIMIT_NOFILE %q, want at most 65536", res.Stdout)
			}
			res, err = sb.Exec(ctx, api.ExecRequest{Shell: `i=0; while [ $i -lt 70000 ]; do eval "exec $((i+10))</dev/null" 2>/dev/null || break; i=$((i+1)); done; echo $i`, TimeoutSeconds: 60})
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := strconv.Atoi(strings.TrimSpace(res.Stdout)); n >= 70000 {
				t.Errorf("opened %d files: no open-files limit", n)
			}

			// CPU: the quota is in the sandbox's cgroup (both runtimes
			// put the sandbox, or its kernel, in it).
			quota := cgroupValue(t, "cpu", sb.ID, "cpu.cfs_quota_us")
			period := cgroupValue(t, "cpu", sb.ID, "cpu.cfs_period_us")
			if quota*2 != period {
				t.Errorf("cpu quota %d/%d, want half a CPU", quota, period)
			}
			// Spinning two processes for 2 s of wall time uses about 1 s
			// of CPU under a 0.5 quota.
			before := cgroupValue(t, "cpuacct", sb.ID, "cpuacct.usage")
			if _, err := sb.Exec(ctx, api.ExecRequest{Shell: "timeout 2 sh -c 'while :; do :; done' & timeout 2 sh -c 'while :; do :; done'; wait"}); err != nil {
				t.Fatal(err)
			}
			used := time.Duration(cgroupValue(t, "cpuacct", sb.ID, "cpuacct.usage") - before)
			t.Logf("%s: 2 spinners for 2 s under cpus 0.5 used %v of CPU", rt, used)
			if used > 1500*time.Millisecond {
				t.Errorf("used %v of CPU in 2 s with cpus 0.5", used)
			}

			// Processes: the pids limit under runc is the host cgroup's;
			// under gVisor RLIMIT_NPROC inside, the cgroup a backstop.
			res, err = sb.Exec(ctx, api.ExecRequest{Shell: `i=0; while [ $i -lt 300 ]; do sleep 5 & [ $? -eq 0 ] || break; i=$((i+1)); done 2>/dev/null; echo $i`, TimeoutSeconds: 60})
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := strconv.Atoi(strings.TrimSpace(res.Stdout)); n >= 300 {
				t.Errorf("started %d processes with pids_limit 100", n)
			}
			// While the processes hold every pid, a new exec is refused
			// with a clear error (runc: the shim cannot start); once they
			// end, the sandbox takes execs again.
			_, err = sb.Exec(ctx, api.ExecRequest{Cmd: []string{"true"}})
			if err != nil && !errors.Is(err, client.ErrResourceExhausted) {
				t.Errorf("exec at the pids limit: %v, want success or resource exhausted", err)
			}
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				res, err := sb.Exec(ctx, api.ExecRequest{Cmd: []string{"echo", "alive"}})
				if err == nil && res.Stdout == "alive\n" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("sandbox unusable after its processes ended: %+v %v", res, err)
				}
			}
		})
	}
}

// cgroupValue reads an integer from a v1 controller file of the sandbox.
func cgroupValue(t *testing.T, controller, id, file string) int64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", controller, "airlock", id, file))
	if err != nil {
		t.Skipf("cgroup v1 %s controller: %v", controller, err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return n
}
