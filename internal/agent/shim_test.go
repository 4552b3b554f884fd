package agent

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/airlockdev/airlock/internal/agentproto"
)

// TestExecTimeoutKillsEscapedProcesses runs commands that leave the
// command's process tree the ways a /proc parent walk from the command
// cannot follow: a double fork with setsid (reparented away from the
// command), and a stopped job. The timeout must still kill them all.
func TestExecTimeoutKillsEscapedProcesses(t *testing.T) {
	c := newClient(t)
	var out bytes.Buffer
	start := time.Now()
	exit, err := c.Exec(testCtx(t), agentproto.Request{
		Argv: []string{"sh", "-c", `
			sh -c 'setsid sleep 301 </dev/null >/dev/null 2>&1 & echo $!'
			sleep 302 & kill -STOP $! && echo $!
			sleep 303`},
		TimeoutMS: 700,
	}, agentproto.ExecIO{Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if !exit.TimedOut || exit.Signal != "KILL" {
		t.Fatalf("exit = %+v, want timed out by KILL", exit)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("timeout took %v", d)
	}
	pids := parsePids(t, out.String())
	if len(pids) != 2 {
		t.Fatalf("pids %v from output %q", pids, out.String())
	}
	for _, pid := range pids {
		waitGone(t, pid)
	}
}

// TestExecBackgroundServerKeepsRunning checks a server started in the
// background outlives its exec under the shim, which the exec does not
// wait for.
func TestExecBackgroundServerKeepsRunning(t *testing.T) {
	c := newClient(t)
	var out bytes.Buffer
	start := time.Now()
	exit, err := c.Exec(testCtx(t), agentproto.Request{
		Argv: []string{"sh", "-c", "nohup sleep 30 >/dev/null 2>&1 & echo $!"},
	}, agentproto.ExecIO{Stdout: &out})
	if err != nil || exit.Code != 0 {
		t.Fatalf("exit %+v, err %v", exit, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("exec took %v: it waited for its background child", d)
	}
	pids := parsePids(t, out.String())
	if len(pids) != 1 {
		t.Fatalf("output %q", out.String())
	}
	time.Sleep(100 * time.Millisecond)
	ppid, ok := readPPID(pids[0])
	if !ok {
		t.Fatalf("background server %d is gone", pids[0])
	}
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(ppid) + "/cmdline")
	if !strings.Contains(string(cmdline), shimArg) {
		t.Errorf("background server's parent %d is %q, want the exec shim", ppid, cmdline)
	}
	syscall.Kill(pids[0], syscall.SIGKILL)
	waitGone(t, pids[0])
	waitGone(t, ppid) // the shim leaves with its last descendant
}

// TestExecCapabilities checks the bounding set: empty for a non-root user,
// root's without CAP_SETPCAP. Needs a root agent to switch users.
func TestExecCapabilities(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching users needs root")
	}
	c := newClient(t)
	for _, tc := range []struct {
		user string
		want func(bnd uint64) bool
	}{
		{"65534", func(bnd uint64) bool { return bnd == 0 }},
		{"root", func(bnd uint64) bool { return bnd != 0 && bnd&(1<<8) == 0 }},
	} {
		var out bytes.Buffer
		_, err := c.Exec(testCtx(t), agentproto.Request{Argv: []string{"grep", "-E", "^Cap(Bnd|Eff|Amb)", "/proc/self/status"}, User: tc.user},
			agentproto.ExecIO{Stdout: &out})
		if err != nil {
			t.Fatal(err)
		}
		caps := map[string]uint64{}
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			k, v, _ := strings.Cut(line, ":")
			caps[k], _ = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
		if !tc.want(caps["CapBnd"]) || caps["CapAmb"] != 0 {
			t.Errorf("user %s: %q", tc.user, out.String())
		}
		if tc.user != "root" && caps["CapEff"] != 0 {
			t.Errorf("user %s has effective capabilities: %q", tc.user, out.String())
		}
	}
}

// TestExecOnlyStdioOpen checks a command inherits no descriptor but its
// stdio: not the agent's connection, not the shim's control socket.
func TestExecOnlyStdioOpen(t *testing.T) {
	c := newClient(t)
	var out bytes.Buffer
	_, err := c.Exec(testCtx(t), agentproto.Request{Argv: []string{"sh", "-c", "ls /proc/$$/fd"}},
		agentproto.ExecIO{Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(out.String()); strings.Join(got, " ") != "0 1 2" {
		t.Errorf("open fds of an exec'd shell: %v, want 0 1 2", got)
	}
}
