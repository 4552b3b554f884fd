package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
)

func TestExec(t *testing.T) {
	c := newClient(t)
	for _, tc := range []struct {
		name           string
		req            agentproto.Request
		stdout, stderr string
		exit           agentproto.ExitStatus
	}{
		{
			name:   "exit code",
			req:    agentproto.Request{Argv: []string{"sh", "-c", "echo hi; exit 3"}},
			stdout: "hi\n",
			exit:   agentproto.ExitStatus{Code: 3},
		},
		{
			name:   "stdout and stderr",
			req:    agentproto.Request{Argv: []string{"sh", "-c", "echo out; echo err >&2; echo out2"}},
			stdout: "out\nout2\n",
			stderr: "err\n",
		},
		{
			name:   "default env and override",
			req:    agentproto.Request{Argv: []string{"sh", "-c", `echo "$USER $LOGNAME $HOME $LANG $FOO"`}, Env: []string{"FOO=bar", "LANG=C"}},
			stdout: "root root /root C bar\n",
		},
		{
			name:   "default cwd is home",
			req:    agentproto.Request{Argv: []string{"pwd"}},
			stdout: "/root\n",
		},
		{
			name:   "explicit cwd and numeric user",
			req:    agentproto.Request{Argv: []string{"sh", "-c", "pwd; id -u"}, Cwd: "/tmp", User: "0"},
			stdout: "/tmp\n0\n",
		},
		{
			name:   "PATH from request env",
			req:    agentproto.Request{Argv: []string{"true"}, Env: []string{"PATH=/bin:/usr/bin"}},
			stdout: "",
		},
		{
			name: "killed by signal",
			req:  agentproto.Request{Argv: []string{"sh", "-c", "kill -TERM $$"}},
			exit: agentproto.ExitStatus{Code: 143, Signal: "TERM"},
		},
		{
			name:   "own process group",
			req:    agentproto.Request{Argv: []string{"sh", "-c", `[ "$(ps -o pgid= -p $$ | tr -d ' ')" = "$$" ] && echo leader`}},
			stdout: "leader\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			exit, err := c.Exec(testCtx(t), tc.req, agentproto.ExecIO{Stdout: &stdout, Stderr: &stderr})
			if err != nil {
				t.Fatal(err)
			}
			if exit != tc.exit {
				t.Errorf("exit = %+v, want %+v", exit, tc.exit)
			}
			if stdout.String() != tc.stdout || stderr.String() != tc.stderr {
				t.Errorf("stdout %q stderr %q, want %q %q", stdout.String(), stderr.String(), tc.stdout, tc.stderr)
			}
		})
	}
}

func TestExecErrors(t *testing.T) {
	c := newClient(t)
	for _, tc := range []struct {
		name string
		req  agentproto.Request
		want error
		msg  string
	}{
		{"missing executable", agentproto.Request{Argv: []string{"no-such-command-airlock"}}, errdefs.ErrNotFound, "no-such-command-airlock"},
		{"missing absolute path", agentproto.Request{Argv: []string{"/no/such/bin"}}, errdefs.ErrNotFound, "/no/such/bin"},
		{"missing user", agentproto.Request{Argv: []string{"true"}, User: "no-such-user"}, errdefs.ErrNotFound, "no-such-user"},
		{"missing cwd", agentproto.Request{Argv: []string{"true"}, Cwd: "/no/such/dir"}, errdefs.ErrNotFound, "/no/such/dir"},
		{"relative cwd", agentproto.Request{Argv: []string{"true"}, Cwd: "tmp"}, errdefs.ErrInvalidArgument, "tmp"},
		{"cwd is a file", agentproto.Request{Argv: []string{"true"}, Cwd: "/etc/passwd"}, errdefs.ErrInvalidArgument, "not a directory"},
		{"bad env", agentproto.Request{Argv: []string{"true"}, Env: []string{"NOEQUALS"}}, errdefs.ErrInvalidArgument, "NOEQUALS"},
		{"not executable", agentproto.Request{Argv: []string{"/etc/passwd"}}, errdefs.ErrInvalidArgument, "permission denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Exec(testCtx(t), tc.req, agentproto.ExecIO{})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err = %v, want %v mentioning %q", err, tc.want, tc.msg)
			}
		})
	}
}

func TestExecMissingDefaultUser(t *testing.T) {
	c, err := agentproto.NewClient(serve(t, Config{DefaultUser: "no-such-default-user"}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Exec(testCtx(t), agentproto.Request{Argv: []string{"true"}}, agentproto.ExecIO{})
	if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "no-such-default-user") {
		t.Fatalf("err = %v", err)
	}
}

func TestExecStdin(t *testing.T) {
	c := newClient(t)
	in := make([]byte, 3<<20+17)
	rand.Read(in)
	var out bytes.Buffer
	exit, err := c.Exec(testCtx(t), agentproto.Request{Argv: []string{"cat"}},
		agentproto.ExecIO{Stdin: bytes.NewReader(in), Stdout: &out})
	if err != nil || exit.Code != 0 {
		t.Fatalf("exit %+v, err %v", exit, err)
	}
	if !bytes.Equal(out.Bytes(), in) {
		t.Fatalf("stdin round trip: got %d bytes, want %d", out.Len(), len(in))
	}
}

func TestExecWithoutStdinReadsDevNull(t *testing.T) {
	c := newClient(t)
	var out bytes.Buffer
	_, err := c.Exec(testCtx(t), agentproto.Request{Argv: []string{"sh", "-c", "cat; echo done"}}, agentproto.ExecIO{Stdout: &out})
	if err != nil || out.String() != "done\n" {
		t.Fatalf("out %q, err %v", out.String(), err)
	}
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}

func TestExecLargeOutput(t *testing.T) {
	c := newClient(t)
	const size = 20 << 20
	var out countWriter
	exit, err := c.Exec(testCtx(t), agentproto.Request{Argv: []string{"head", "-c", strconv.Itoa(size), "/dev/zero"}},
		agentproto.ExecIO{Stdout: &out})
	if err != nil || exit.Code != 0 {
		t.Fatalf("exit %+v, err %v", exit, err)
	}
	if out.n != size {
		t.Fatalf("got %d bytes of output, want %d", out.n, size)
	}
}

func TestExecTimeoutKillsTree(t *testing.T) {
	c := newClient(t)
	var shell int
	var out bytes.Buffer
	start := time.Now()
	exit, err := c.Exec(testCtx(t), agentproto.Request{
		// setsid moves one child out of the process group: only the /proc
		// walk can find it.
		Argv:      []string{"sh", "-c", "sleep 300 & echo $!; setsid sleep 301 & echo $!; sleep 302"},
		TimeoutMS: 500,
	}, agentproto.ExecIO{Stdout: &out, OnStart: func(pid int) { shell = pid }})
	if err != nil {
		t.Fatal(err)
	}
	if want := (agentproto.ExitStatus{Code: 137, Signal: "KILL", TimedOut: true}); exit != want {
		t.Fatalf("exit = %+v, want %+v", exit, want)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("timeout took %v", d)
	}
	pids := append(parsePids(t, out.String()), shell)
	if len(pids) != 3 {
		t.Fatalf("pids %v from output %q", pids, out.String())
	}
	for _, pid := range pids {
		waitGone(t, pid)
	}
}

func TestExecBackgroundChildDoesNotHoldExec(t *testing.T) {
	c := newClient(t)
	var out bytes.Buffer
	start := time.Now()
	exit, err := c.Exec(testCtx(t), agentproto.Request{Argv: []string{"sh", "-c", "sleep 30 & echo $!"}},
		agentproto.ExecIO{Stdout: &out})
	if err != nil || exit.Code != 0 {
		t.Fatalf("exit %+v, err %v", exit, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("exec held open for %v by a background child", d)
	}
	pids := parsePids(t, out.String())
	if len(pids) != 1 {
		t.Fatalf("output %q", out.String())
	}
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pids[0]) + "/cmdline")
	if !bytes.HasPrefix(cmdline, []byte("sleep\x00")) {
		t.Fatalf("background child %d is %q, not sleep", pids[0], cmdline)
	}
	syscall.Kill(pids[0], syscall.SIGKILL)
	waitGone(t, pids[0])
}

func TestExecCancelKillsProcess(t *testing.T) {
	c := newClient(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	started := make(chan int, 1)
	done := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, agentproto.Request{Argv: []string{"sleep", "300"}},
			agentproto.ExecIO{OnStart: func(pid int) { started <- pid }})
		done <- err
	}()
	var pid int
	select {
	case pid = <-started:
	case <-time.After(testTimeout):
		t.Fatal("exec did not start")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	waitGone(t, pid)
}

func TestExecSignal(t *testing.T) {
	for _, tc := range []struct {
		signal string
		exit   agentproto.ExitStatus
	}{
		{"TERM", agentproto.ExitStatus{Code: 143, Signal: "TERM"}},
		{"SIGUSR1", agentproto.ExitStatus{Code: 138, Signal: "USR1"}},
		{"9", agentproto.ExitStatus{Code: 137, Signal: "KILL"}},
	} {
		t.Run(tc.signal, func(t *testing.T) {
			s := rawStream(t, agentproto.Request{Op: agentproto.OpExec, Argv: []string{"sleep", "300"}})
			if rep := readReply(t, s); rep.Error != nil || rep.PID == 0 {
				t.Fatalf("start reply %+v", rep)
			}
			if err := agentproto.WriteJSON(s, agentproto.FrameControl, agentproto.Control{Signal: tc.signal}); err != nil {
				t.Fatal(err)
			}
			rep := readReply(t, s)
			if rep.Exit == nil || *rep.Exit != tc.exit {
				t.Fatalf("exit reply %+v, want %+v", rep, tc.exit)
			}
			if _, err := agentproto.ReadFrame(s); err != io.EOF {
				t.Fatalf("after exit: %v, want the stream closed", err)
			}
		})
	}
}

func TestExecStdinEOFFrame(t *testing.T) {
	s := rawStream(t, agentproto.Request{Op: agentproto.OpExec, Argv: []string{"wc", "-c"}, Stdin: true})
	if rep := readReply(t, s); rep.Error != nil {
		t.Fatal(rep.Error)
	}
	agentproto.WriteFrame(s, agentproto.FrameData, []byte("hello"))
	agentproto.WriteFrame(s, agentproto.FrameEOF, nil)
	var out bytes.Buffer
	for {
		f, err := agentproto.ReadFrame(s)
		if err != nil {
			t.Fatal(err)
		}
		if f.Type == agentproto.FrameStdout {
			out.Write(f.Payload)
			continue
		}
		var rep agentproto.Reply
		if err := f.Decode(&rep); err != nil || rep.Exit == nil || rep.Exit.Code != 0 {
			t.Fatalf("reply %s, %v", f.Payload, err)
		}
		break
	}
	if strings.TrimSpace(out.String()) != "5" {
		t.Fatalf("wc -c read %q", out.String())
	}
}

func parsePids(t *testing.T, s string) []int {
	t.Helper()
	var pids []int
	for _, f := range strings.Fields(s) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("output %q: %v", s, err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// waitGone waits for pid to be dead: gone from /proc, or a zombie waiting
// for a reaper outside this test (orphans go to the host's init).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		if i := bytes.LastIndexByte(b, ')'); i > 0 && bytes.HasPrefix(b[i+1:], []byte(" Z")) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("process %d still alive: %s", pid, b)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
