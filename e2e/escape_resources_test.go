package e2e

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/client"
)

// shOut runs a shell command in sb and returns stdout and the result.
func shOut(t *testing.T, sb *client.Sandbox, user, cmd string, timeout float64) (string, *api.ExecResult) {
	t.Helper()
	res, err := sb.Exec(testCtx(t, 2*time.Minute), api.ExecRequest{Shell: cmd, User: user, TimeoutSeconds: timeout})
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	return strings.TrimSpace(res.Stdout), res
}

// fileAPIProbes plant links inside the sandbox and use the file API on
// them: paths resolve inside the sandbox's root, and writes replace the
// link rather than follow it.
func fileAPIProbes(t *testing.T, sb *client.Sandbox, host *escapeHost) {
	ctx := testCtx(t, time.Minute)
	shOut(t, sb, "", "ln -sf /etc/passwd /tmp/up-link; ln -sf "+host.marker+" /tmp/host-link; ln -sf /proc/1/root/../.."+host.marker+" /tmp/proc-link", 10)
	before, _ := shOut(t, sb, "", "sha256sum /etc/passwd", 10)

	// Upload through a planted symlink: must not overwrite /etc/passwd.
	if _, err := sb.Upload(ctx, "/tmp/up-link", strings.NewReader("pwned\n"), 0o644); err != nil {
		t.Fatalf("upload: %v", err)
	}
	// (python, not stat(1): coreutils' statx fails with EINVAL on runsc 20221219)
	after, _ := shOut(t, sb, "", `sha256sum /etc/passwd; python3 -c 'import os, stat; print("regular" if stat.S_ISREG(os.lstat("/tmp/up-link").st_mode) else "link")'`, 10)
	if !strings.HasPrefix(after, before) || !strings.HasSuffix(after, "regular") {
		t.Errorf("ESCAPE PROBE %q: /etc/passwd %q -> %q (must be stopped by: the upload replaces the link, it is not followed)", "upload through a planted symlink", before, after)
	}
	// Download through links to the host's path: they resolve inside.
	for _, p := range []string{"/tmp/host-link", "/tmp/proc-link", "/../../.." + host.marker} {
		var buf bytes.Buffer
		_, err := sb.Download(ctx, p, &buf)
		if !errors.Is(err, client.ErrNotFound) {
			t.Errorf("ESCAPE PROBE %q: download %s: %v, %q (must be stopped by: paths resolve inside the sandbox's root: not found)", "download a host file through a link", p, err, buf.String())
		}
	}
	// A hard link to /etc/shadow cannot be made by the default user, so
	// there is nothing to download (the probe table checks the link).
	if _, err := sb.Stat(ctx, "/tmp/shadow-link"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("ESCAPE PROBE %q: /tmp/shadow-link exists (%v): a hard link to /etc/shadow was made", "hard link to /etc/shadow", err)
	}
}

// resourceProbes exhaust what a sandbox may use without killing it: its
// disk, inodes, output, CPU time; and leave processes behind a timeout.
func resourceProbes(t *testing.T, d *daemon, sb *client.Sandbox) {
	// Disk: the sandbox's own 64 MB layer fills, not the host's disk.
	out, _ := shOut(t, sb, "", "dd if=/dev/zero of=/tmp/fill bs=1M count=200 2>&1; rm -f /tmp/fill", 60)
	if !strings.Contains(out, "No space left on device") {
		t.Errorf("ESCAPE PROBE %q: %q (must be stopped by: ENOSPC from the sandbox's disk_mb layer)", "disk fill", out)
	}
	// Inodes of the same layer.
	out, _ = shOut(t, sb, "", `python3 -c '
import os
os.makedirs("/tmp/inodes", exist_ok=True)
n = 0
try:
    while True:
        open("/tmp/inodes/%d" % n, "w").close(); n += 1
except OSError as e:
    print(os.strerror(e.errno), n)
'; rm -rf /tmp/inodes`, 300)
	if !strings.Contains(out, "No space left on device") {
		t.Errorf("ESCAPE PROBE %q: %q (must be stopped by: ENOSPC, the layer's inode table is full)", "inode fill", out)
	}
	if out, res := shOut(t, sb, "", "echo ok > /tmp/after && cat /tmp/after", 10); out != "ok" {
		t.Errorf("sandbox unusable after disk and inode fill: %+v", res)
	}

	// Output flood, streamed: capped per stream, the process runs on.
	var stdout countingWriter
	res, err := sb.ExecStream(testCtx(t, time.Minute), api.ExecRequest{
		Shell: "head -c 50000000 /dev/zero; echo done >&2", MaxOutputBytes: 1 << 20,
	}, &stdout, io.Discard)
	if err != nil || stdout.n != 1<<20 || !res.StdoutTruncated || res.ExitCode != 0 {
		t.Errorf("ESCAPE PROBE %q: %d bytes, %+v, %v (must be stopped by: the stream cap, 1 MiB here)", "output flood", stdout.n, res, err)
	}

	// CPU spin past its timeout.
	start := time.Now()
	_, res = shOut(t, sb, "", `python3 -c 'while True: pass'`, 1)
	if took := time.Since(start); !res.TimedOut || took > 10*time.Second {
		t.Errorf("ESCAPE PROBE %q: %+v after %v (must be stopped by: the exec timeout's kill)", "CPU spin past the timeout", res, took)
	}

	// Processes that try to survive their exec: a double-forked setsid
	// daemon and a stopped child.
	_, res = shOut(t, sb, "", `python3 -c '
import os, signal, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        open("/tmp/survivor", "w").write(str(os.getpid()))
        while True: time.sleep(1)
    os._exit(0)
if os.fork() == 0:
    open("/tmp/stopped", "w").write(str(os.getpid()))
    os.kill(os.getpid(), signal.SIGSTOP)
    os._exit(0)
while True: time.sleep(1)'`, 2)
	if !res.TimedOut {
		t.Fatalf("survivor exec did not time out: %+v", res)
	}
	out, _ = shOut(t, sb, "", `for f in /tmp/survivor /tmp/stopped; do p=$(cat $f); if kill -0 $p 2>/dev/null; then echo "alive $f $p"; fi; done; echo checked`, 10)
	if out != "checked" {
		t.Errorf("ESCAPE PROBE %q: %q (must be stopped by: the timeout kills the exec's shim tree / marker group)", "process that survives its exec", out)
	}
}

type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// bombProbes run a fork bomb and a memory bomb in sandboxes of their own,
// then check the daemon and the neighbour sandbox are unharmed and the
// bombed sandbox can be deleted (and, under runc, still used).
func bombProbes(t *testing.T, d *daemon, rt string, neighbour *client.Sandbox) {
	for _, b := range []struct {
		name, shell string
		req         api.CreateSandboxRequest
		check       func(res *api.ExecResult, took time.Duration) string
	}{
		{
			name:  "fork bomb",
			shell: "f(){ f|f& }; f; sleep 30",
			req:   api.CreateSandboxRequest{PidsLimit: 128},
			check: func(res *api.ExecResult, took time.Duration) string {
				if took > 20*time.Second {
					return "not contained within the exec timeout"
				}
				return ""
			},
		},
		{
			name: "memory bomb",
			shell: `python3 -c 'x = []
while True: x.append(bytearray(16 << 20))'`,
			req: api.CreateSandboxRequest{MemoryMB: 128},
			check: func(res *api.ExecResult, took time.Duration) string {
				if !res.OOMKilled || res.ExitCode != 137 {
					return "not reported as OOM killed"
				}
				return ""
			},
		},
	} {
		t.Run(b.name, func(t *testing.T) {
			b.req.Runtime, b.req.Template = rt, "base"
			sb := d.newSandbox(t, b.req)
			start := time.Now()
			res, err := sb.Exec(testCtx(t, 2*time.Minute), api.ExecRequest{Shell: b.shell, TimeoutSeconds: 5})
			took := time.Since(start)
			t.Logf("%s (%s): %+v err=%v after %v", b.name, rt, res, err, took)
			switch {
			case err == nil:
				if msg := b.check(res, took); msg != "" {
					t.Errorf("ESCAPE PROBE %q: %s: %+v", b.name, msg, res)
				}
			case rt == api.RuntimeGVisor && errors.Is(err, client.ErrResourceExhausted):
				// gVisor: the host's limit killed the sandbox's kernel;
				// the error says so, nothing else is touched.
			default:
				t.Errorf("ESCAPE PROBE %q: %v", b.name, err)
			}
			after, err := sb.Exec(testCtx(t, time.Minute), api.ExecRequest{Cmd: []string{"echo", "alive"}})
			switch {
			case err == nil && after.Stdout == "alive\n":
			case rt == api.RuntimeGVisor && (errors.Is(err, client.ErrResourceExhausted) || errors.Is(err, client.ErrConflict)):
				t.Logf("%s took the gVisor sandbox down: %v", b.name, err)
			default:
				t.Errorf("%s: sandbox after the bomb: %+v %v", b.name, after, err)
			}
			if out, _ := shOut(t, neighbour, "", "cat /tmp/nb-secret", 10); out != "neighbour-secret" {
				t.Errorf("%s: neighbour sandbox harmed: %q", b.name, out)
			}
			if err := d.client.DeleteSandbox(testCtx(t, time.Minute), sb.ID); err != nil {
				t.Errorf("%s: delete the bombed sandbox: %v", b.name, err)
			}
		})
	}
}
