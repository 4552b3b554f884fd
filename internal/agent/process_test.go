package agent

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// lockedBuffer is a bytes.Buffer safe to read while an attach writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitUntil polls cond until it holds or the test times out.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startBg starts a background process and kills it when the test ends.
func startBg(t *testing.T, c *agentproto.Client, req agentproto.ProcRequest) agentproto.ProcInfo {
	t.Helper()
	p, err := c.StartProcess(testCtx(t), req)
	if err != nil {
		t.Fatalf("start %v: %v", req.Argv, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.KillProcess(ctx, p.PID, "")
	})
	return p
}

func TestProcessAttachSeesAllOutput(t *testing.T) {
	c := newClient(t)
	p := startBg(t, c, agentproto.ProcRequest{Tag: "job", Argv: []string{"sh", "-c", "echo one; echo two >&2; sleep 0.3; echo three; exit 4"}})
	if p.PID <= 0 || p.Tag != "job" || !p.Running {
		t.Fatalf("start = %+v", p)
	}
	// Attach late, by tag, twice at once: both see everything.
	time.Sleep(100 * time.Millisecond)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var stdout, stderr bytes.Buffer
			got, err := c.Attach(testCtx(t), 0, "job", true, agentproto.AttachHandler{Stdout: &stdout, Stderr: &stderr})
			if err != nil {
				t.Error(err)
				return
			}
			if stdout.String() != "one\nthree\n" || stderr.String() != "two\n" {
				t.Errorf("attach output %q %q", stdout.String(), stderr.String())
			}
			if got.Running || got.Exit == nil || got.Exit.Code != 4 {
				t.Errorf("attach result %+v, want exit 4", got)
			}
		}()
	}
	wg.Wait()
	// Still there after the status was read (grace period), by pid.
	var stdout bytes.Buffer
	got, err := c.Attach(testCtx(t), p.PID, "", false, agentproto.AttachHandler{Stdout: &stdout})
	if err != nil || got.Exit == nil || stdout.String() != "one\nthree\n" {
		t.Errorf("attach after exit = %+v %q %v", got, stdout.String(), err)
	}
}

func TestProcessNoFollowWhileRunning(t *testing.T) {
	c := newClient(t)
	p := startBg(t, c, agentproto.ProcRequest{Argv: []string{"sh", "-c", "echo ready; exec sleep 30"}})
	var out lockedBuffer
	waitUntil(t, "output", func() bool {
		out = lockedBuffer{}
		got, err := c.Attach(testCtx(t), p.PID, "", false, agentproto.AttachHandler{Stdout: &out})
		if err != nil {
			t.Fatal(err)
		}
		if !got.Running || got.Exit != nil {
			t.Fatalf("no-follow attach = %+v, want running", got)
		}
		return out.String() == "ready\n"
	})
}

func TestProcessStdinRoundTrip(t *testing.T) {
	c := newClient(t)
	p := startBg(t, c, agentproto.ProcRequest{Argv: []string{"cat"}, Stdin: true})
	n, err := c.WriteStdin(testCtx(t), p.PID, "", strings.NewReader("hello\n"))
	if err != nil || n != 6 {
		t.Fatalf("write stdin = %d, %v", n, err)
	}
	if err := c.CloseStdin(testCtx(t), p.PID, ""); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	got, err := c.Attach(testCtx(t), p.PID, "", true, agentproto.AttachHandler{Stdout: &out})
	if err != nil || out.String() != "hello\n" || got.Exit == nil || got.Exit.Code != 0 {
		t.Errorf("attach = %+v %q %v", got, out.String(), err)
	}
	if _, err := c.WriteStdin(testCtx(t), p.PID, "", strings.NewReader("x")); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("stdin after exit: %v, want conflict", err)
	}
}

func TestProcessErrors(t *testing.T) {
	c := newClient(t)
	startBg(t, c, agentproto.ProcRequest{Tag: "held", Argv: []string{"sleep", "30"}})
	for _, tc := range []struct {
		name string
		err  error
		kind error
	}{
		{"tag in use", func() error {
			_, err := c.StartProcess(testCtx(t), agentproto.ProcRequest{Tag: "held", Argv: []string{"true"}})
			return err
		}(), errdefs.ErrConflict},
		{"numeric tag", func() error {
			_, err := c.StartProcess(testCtx(t), agentproto.ProcRequest{Tag: "123", Argv: []string{"true"}})
			return err
		}(), errdefs.ErrInvalidArgument},
		{"missing executable", func() error {
			_, err := c.StartProcess(testCtx(t), agentproto.ProcRequest{Argv: []string{"no-such-binary"}})
			return err
		}(), errdefs.ErrNotFound},
		{"unknown pid", c.SignalProcess(testCtx(t), 999999, "", "TERM"), errdefs.ErrNotFound},
		{"unknown tag", c.CloseStdin(testCtx(t), 0, "nope"), errdefs.ErrNotFound},
		{"bad signal", c.SignalProcess(testCtx(t), 0, "held", "BOGUS"), errdefs.ErrInvalidArgument},
		{"no stdin", c.CloseStdin(testCtx(t), 0, "held"), errdefs.ErrInvalidArgument},
		{"resize without pty", c.ResizePTY(testCtx(t), 0, "held", 80, 24), errdefs.ErrInvalidArgument},
	} {
		if !errors.Is(tc.err, tc.kind) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.kind)
		}
	}
}

func TestProcessSignalAndKillTree(t *testing.T) {
	c := newClient(t)
	p := startBg(t, c, agentproto.ProcRequest{Argv: []string{"sh", "-c", `trap 'echo got TERM; exit 3' TERM; echo ready; while :; do sleep 0.05; done`}})
	var out lockedBuffer
	done := make(chan agentproto.ProcInfo, 1)
	go func() {
		got, _ := c.Attach(testCtx(t), p.PID, "", true, agentproto.AttachHandler{Stdout: &out})
		done <- got
	}()
	waitUntil(t, "ready", func() bool { return strings.Contains(out.String(), "ready") })
	if err := c.SignalProcess(testCtx(t), p.PID, "", "SIGTERM"); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.Exit == nil || got.Exit.Code != 3 || !strings.Contains(out.String(), "got TERM") {
		t.Errorf("after TERM: %+v, output %q", got, out.String())
	}

	tree := startBg(t, c, agentproto.ProcRequest{Argv: []string{"sh", "-c", "sleep 60 & setsid sleep 60 & echo $!; wait"}})
	var pids lockedBuffer
	go c.Attach(testCtx(t), tree.PID, "", true, agentproto.AttachHandler{Stdout: &pids})
	waitUntil(t, "child pid", func() bool { return strings.HasSuffix(pids.String(), "\n") })
	killed, err := c.KillProcess(testCtx(t), tree.PID, "")
	if err != nil || killed.Running || killed.Exit == nil || killed.Exit.Signal != "KILL" {
		t.Fatalf("kill = %+v, %v", killed, err)
	}
	for _, pid := range parsePids(t, pids.String()) {
		waitGone(t, pid)
	}
}

func TestProcessPTY(t *testing.T) {
	c := newClient(t)
	p := startBg(t, c, agentproto.ProcRequest{Tag: "term", PTY: &agentproto.PTYSize{Cols: 80, Rows: 24}, Argv: []string{"sh"}})
	if !p.PTY {
		t.Fatalf("start = %+v, want pty", p)
	}
	att, err := c.OpenAttach(testCtx(t), 0, "term", true)
	if err != nil {
		t.Fatal(err)
	}
	defer att.Close()
	var out lockedBuffer
	done := make(chan agentproto.ProcInfo, 1)
	go func() {
		got, _ := att.Run(agentproto.AttachHandler{Stdout: &out})
		done <- got
	}()
	att.Write([]byte("stty size; echo $TERM\n"))
	waitUntil(t, "stty size", func() bool { return strings.Contains(out.String(), "24 80\r\nxterm-256color") })
	if err := att.Resize(100, 30); err != nil {
		t.Fatal(err)
	}
	// The resize and the input travel in order on the same stream.
	att.Write([]byte("stty size\n"))
	waitUntil(t, "resized", func() bool { return strings.Contains(out.String(), "30 100") })
	if err := c.ResizePTY(testCtx(t), p.PID, "", 120, 40); err != nil {
		t.Fatal(err)
	}
	att.Write([]byte("stty size; exit 5\n"))
	got := <-done
	if got.Exit == nil || got.Exit.Code != 5 || !strings.Contains(out.String(), "40 120") {
		t.Errorf("pty exit %+v, output %q", got, out.String())
	}
}

func TestProcTableRetention(t *testing.T) {
	tbl := newProcTable()
	now := time.Now()
	tbl.now = func() time.Time { return now }
	add := func(pid int, tag string, read bool, exitedAgo time.Duration) *bgProc {
		p, err := tbl.start(tag, func() (*bgProc, error) { return newBgProc(pid, nil, tag, []string{"x"}, nil), nil })
		if err != nil {
			t.Fatal(err)
		}
		if exitedAgo >= 0 {
			st := agentproto.ExitStatus{}
			p.exit, p.exitedAt = &st, now.Add(-exitedAgo)
			if read {
				p.readAt = now.Add(-exitedAgo)
			}
		}
		return p
	}
	add(1, "a", false, -1)         // running
	add(2, "b", true, time.Hour)   // read long ago: goes
	add(3, "c", true, time.Second) // read recently: grace
	add(4, "d", false, time.Hour)  // never read: stays
	if _, err := tbl.get(2, ""); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("read entry past grace: %v, want not found", err)
	}
	for _, pid := range []int{1, 3, 4} {
		if _, err := tbl.get(pid, ""); err != nil {
			t.Errorf("pid %d: %v", pid, err)
		}
	}
	// A running process holds its tag; an exited one yields it.
	if _, err := tbl.start("a", func() (*bgProc, error) { return nil, errors.New("must not start") }); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("tag of running process: %v", err)
	}
	add(5, "d", false, -1)
	if p, _ := tbl.get(0, "d"); p == nil || p.pid != 5 {
		t.Errorf("tag d = %v, want the new process 5", p)
	}
	// The cap: read entries go first, then the oldest unread.
	for pid := 100; pid < 100+maxExited; pid++ {
		add(pid, "", false, time.Duration(pid)*time.Millisecond)
	}
	if _, err := tbl.get(3, ""); err == nil {
		t.Error("read entry survived the cap while unread ones were evicted")
	}
	if _, err := tbl.get(4, ""); err == nil {
		t.Error("oldest unread entry survived the cap")
	}
	if n := len(tbl.list()); n != maxExited+2 { // + running 1 and 5
		t.Errorf("table has %d entries, want %d", n, maxExited+2)
	}
}
