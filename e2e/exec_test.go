package e2e

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/client"
)

func TestExecOutputAndExitCodes(t *testing.T) {
	d := startDaemon(t, "")
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt, Env: map[string]string{"SANDBOX_VAR": "sv"}})
			ctx := testCtx(t, time.Minute)
			cases := []struct {
				name           string
				req            api.ExecRequest
				stdout, stderr string
				code           int
			}{
				{"argv", api.ExecRequest{Cmd: []string{"echo", "hello", "world"}}, "hello world\n", "", 0},
				{"shell split streams", api.ExecRequest{Shell: "echo out; echo err >&2; exit 3"}, "out\n", "err\n", 3},
				{"env layered", api.ExecRequest{Shell: `echo $SANDBOX_VAR $EXEC_VAR`, Env: map[string]string{"EXEC_VAR": "ev"}}, "sv ev\n", "", 0},
				{"cwd", api.ExecRequest{Cmd: []string{"pwd"}, Cwd: "/tmp"}, "/tmp\n", "", 0},
				{"default user is not root", api.ExecRequest{Cmd: []string{"id", "-u"}}, "1000\n", "", 0},
				{"root on request", api.ExecRequest{Cmd: []string{"id", "-u"}, User: "root"}, "0\n", "", 0},
				{"stdin", api.ExecRequest{Cmd: []string{"cat"}, Stdin: []byte("from stdin\x00\xff")}, "from stdin\x00\ufffd", "", 0},
				{"killed by signal", api.ExecRequest{Shell: "kill -9 $$"}, "", "", 137},
				{"network none", api.ExecRequest{Shell: "ls /sys/class/net 2>/dev/null | grep -v '^lo$' | wc -l"}, "0\n", "", 0},
			}
			for _, tc := range cases {
				res, err := sb.Exec(ctx, tc.req)
				if err != nil {
					t.Errorf("%s: %v", tc.name, err)
					continue
				}
				if res.Stdout != tc.stdout || res.Stderr != tc.stderr || res.ExitCode != tc.code {
					t.Errorf("%s: got stdout %q stderr %q code %d; want %q %q %d", tc.name, res.Stdout, res.Stderr, res.ExitCode, tc.stdout, tc.stderr, tc.code)
				}
			}
			_, err := sb.Exec(ctx, api.ExecRequest{Cmd: []string{"no-such-binary"}})
			if !errors.Is(err, client.ErrNotFound) {
				t.Errorf("missing binary: got %v, want ErrNotFound", err)
			}
		})
	}
}

func TestExecStreamingOrder(t *testing.T) {
	d := startDaemon(t, "")
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt})
			var both syncBuffer
			stdout := &taggedWriter{tag: "O", w: &both}
			stderr := &taggedWriter{tag: "E", w: &both}
			res, err := sb.ExecStream(testCtx(t, time.Minute), api.ExecRequest{
				Shell: "for i in 1 2 3; do echo out$i; sleep 0.05; echo err$i >&2; sleep 0.05; done; exit 7",
			}, stdout, stderr)
			if err != nil {
				t.Fatal(err)
			}
			want := "O:out1\nE:err1\nO:out2\nE:err2\nO:out3\nE:err3\n"
			if got := both.String(); got != want || res.ExitCode != 7 {
				t.Errorf("stream order: got %q code %d; want %q code 7", got, res.ExitCode, want)
			}
		})
	}
}

func TestExecOutputCapped(t *testing.T) {
	d := startDaemon(t, "")
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt})
			before := rssKB(t, d.cmd.Process.Pid)
			res, err := sb.Exec(testCtx(t, 2*time.Minute), api.ExecRequest{
				Shell:          "head -c 200000000 /dev/zero; echo done >&2",
				MaxOutputBytes: 1 << 20,
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Stdout) != 1<<20 || !res.StdoutTruncated {
				t.Errorf("stdout: %d bytes truncated=%v; want %d truncated", len(res.Stdout), res.StdoutTruncated, 1<<20)
			}
			if res.Stderr != "done\n" || res.StderrTruncated || res.ExitCode != 0 {
				t.Errorf("stderr %q truncated=%v code %d", res.Stderr, res.StderrTruncated, res.ExitCode)
			}
			after := rssKB(t, d.cmd.Process.Pid)
			// 200 MB went through; the daemon may keep the 1 MB cap plus
			// buffers, not the output.
			if grow := after - before; grow > 64<<10 {
				t.Errorf("daemon RSS grew by %d KiB while streaming 200 MB of output", grow)
			}
			t.Logf("daemon RSS %d KiB -> %d KiB", before, after)
		})
	}
}

func TestExecTimeoutKillsTree(t *testing.T) {
	d := startDaemon(t, "")
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt})
			ctx := testCtx(t, time.Minute)
			start := time.Now()
			res, err := sb.Exec(ctx, api.ExecRequest{
				Shell:          "sleep 301 & sh -c 'sleep 302 & sleep 303' & echo started; sleep 304",
				TimeoutSeconds: 1,
			})
			if err != nil {
				t.Fatal(err)
			}
			if !res.TimedOut || res.ExitCode != 137 || res.Stdout != "started\n" {
				t.Errorf("got %+v; want timed out, code 137, stdout started", res)
			}
			if el := time.Since(start); el > 15*time.Second {
				t.Errorf("timeout took %v", el)
			}
			ps, err := sb.Exec(ctx, api.ExecRequest{Shell: "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"})
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{"301", "302", "303", "304"} {
				if strings.Contains(ps.Stdout, "sleep "+n) {
					t.Errorf("sleep %s survived the timeout: %q", n, ps.Stdout)
				}
			}
		})
	}
}

func TestBaseTemplatePython(t *testing.T) {
	if !haveBase {
		t.Skip("base template not built (AIRLOCK_TEST_BASE=0)")
	}
	d := startDaemon(t, "")
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt, Template: "base"})
			res, err := sb.Exec(testCtx(t, time.Minute), api.ExecRequest{Cmd: []string{"python3", "-c", "print(6*7)"}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Stdout != "42\n" || res.ExitCode != 0 {
				t.Errorf("python3: %+v", res)
			}
		})
	}
}

// rssKB reads a process's resident set size.
func rssKB(t *testing.T, pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	t.Fatalf("no VmRSS for pid %d", pid)
	return 0
}

// syncBuffer collects both streams; the SDK writes them from one goroutine
// in arrival order.
type syncBuffer struct {
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string { return b.buf.String() }

// taggedWriter prefixes each line with a tag, to check interleaving.
type taggedWriter struct {
	tag     string
	w       *syncBuffer
	partial []byte
}

func (t *taggedWriter) Write(p []byte) (int, error) {
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			break
		}
		t.w.Write([]byte(t.tag + ":" + string(t.partial[:i+1])))
		t.partial = t.partial[i+1:]
	}
	return len(p), nil
}
