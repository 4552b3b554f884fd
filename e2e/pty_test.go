package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/client"
)

// openPTY opens a terminal session whose output is collected in the
// returned buffer. The session is killed when the test ends.
func openPTY(t *testing.T, sb *client.Sandbox, opts client.PTYOptions) (*client.PTY, *lockedBuffer) {
	t.Helper()
	pty, err := sb.PTY(testCtx(t, 30*time.Second), opts)
	if err != nil {
		t.Fatal(err)
	}
	out := &lockedBuffer{}
	go io.Copy(out, pty)
	t.Cleanup(func() {
		pty.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		sb.Kill(ctx, client.PIDSelector(pty.PID()))
	})
	return pty, out
}

func TestPTY(t *testing.T) {
	d := startDaemon(t, "")
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt})
			ctx := testCtx(t, 2*time.Minute)
			pty, out := openPTY(t, sb, client.PTYOptions{Cmd: []string{"/bin/sh"}, Cols: 80, Rows: 24, Tag: "term"})
			if pty.PID() <= 0 || pty.Tag() != "term" {
				t.Fatalf("pty pid %d tag %q", pty.PID(), pty.Tag())
			}
			pty.Write([]byte("stty size; echo TERM=$TERM\n"))
			eventually(t, 10*time.Second, "stty size 24 80", func() bool {
				return strings.Contains(out.String(), "24 80\r\nTERM=xterm-256color")
			})
			if err := pty.Resize(ctx, 100, 30); err != nil {
				t.Fatal(err)
			}
			pty.Write([]byte("stty size\n"))
			eventually(t, 10*time.Second, "stty size 30 100", func() bool { return strings.Contains(out.String(), "30 100") })

			// Closing the connection detaches; another client reattaches by
			// tag, sees the session's earlier output, and drives it on.
			pty.Close()
			ps, err := sb.ListProcesses(ctx)
			if err != nil || len(ps) != 1 || !ps[0].Running || !ps[0].PTY {
				t.Fatalf("after detach: %+v, %v", ps, err)
			}
			sb2 := otherClient(t, d, sb.ID)
			pty2, out2 := openPTY(t, sb2, client.PTYOptions{Attach: "term", Cols: 120, Rows: 40})
			eventually(t, 10*time.Second, "replayed output", func() bool { return strings.Contains(out2.String(), "30 100") })
			pty2.Write([]byte("stty size; exit 3\n"))
			code, err := pty2.Wait(ctx)
			if err != nil || code != 3 {
				t.Fatalf("wait = %d, %v; output %q", code, err, out2.String())
			}
			if !strings.Contains(out2.String(), "40 120") {
				t.Errorf("reattach did not resize: %q", out2.String())
			}
		})
	}
}

// TestPTYEchoLatency measures the keystroke round trip through a terminal
// session: a byte written to the WebSocket, through the daemon and agent
// to the PTY, echoed by the sandbox's terminal line discipline and back
// (median of 50, logged; run with -v).
func TestPTYEchoLatency(t *testing.T) {
	d := startDaemon(t, "")
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt})
			pty, err := sb.PTY(testCtx(t, 30*time.Second), client.PTYOptions{Cmd: []string{"cat"}})
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Kill(testCtx(t, 10*time.Second), client.PIDSelector(pty.PID()))
			defer pty.Close()
			buf := make([]byte, 256)
			var samples []time.Duration
			for i := range 50 {
				key := []byte{byte('a' + i%26)}
				began := time.Now()
				if _, err := pty.Write(key); err != nil {
					t.Fatal(err)
				}
				for {
					n, err := pty.Read(buf)
					if err != nil {
						t.Fatal(err)
					}
					if strings.ContainsRune(string(buf[:n]), rune(key[0])) {
						break
					}
				}
				samples = append(samples, time.Since(began))
			}
			sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
			t.Logf("%s: PTY keystroke echo round trip median %v, min %v, max %v",
				rt, samples[len(samples)/2], samples[0], samples[len(samples)-1])
		})
	}
}

// tmuxSession is a detached tmux session on a private server.
type tmuxSession struct {
	t      *testing.T
	socket string
	name   string
}

func (s *tmuxSession) tmux(args ...string) string {
	s.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", s.socket}, args...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func (s *tmuxSession) capture() string { return s.tmux("capture-pane", "-p", "-t", s.name) }

// waitScreen waits until the pane shows want.
func (s *tmuxSession) waitScreen(want string) {
	s.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		screen := s.capture()
		if strings.Contains(screen, want) {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("screen never showed %q:\n%s", want, screen)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestShellCLIUnderTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (scripts/install.sh installs it)")
	}
	if !haveBase {
		t.Skip("needs the base template (python3); AIRLOCK_TEST_BASE=0")
	}
	d := startDaemon(t, "")
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt, Template: "base"})
			// readline (bash, python3) waits for keys with pselect6; if the
			// sandbox refuses it, the shell exits at its first prompt.
			res, err := sb.Exec(testCtx(t, time.Minute), api.ExecRequest{Cmd: []string{"python3", "-c", "import select; select.select([0], [], [], 0)"}})
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != 0 {
				t.Fatalf("select(2) fails in the sandbox, so interactive shells cannot read the terminal:\n%s", res.Stderr)
			}
			dir := t.TempDir()
			exitFile := filepath.Join(dir, "exit")
			s := &tmuxSession{t: t, socket: fmt.Sprintf("airlock-e2e-%d-%s", os.Getpid(), rt), name: "shell"}
			script := fmt.Sprintf("%s --host http://%s shell %s; echo $? > %s; sleep 60",
				filepath.Join(binDir, "airlock"), d.addr, sb.ID, exitFile)
			s.tmux("-f", "/dev/null", "new-session", "-d", "-s", s.name, "-x", "100", "-y", "30", "sh", "-c", script)
			t.Cleanup(func() { exec.Command("tmux", "-L", s.socket, "kill-server").Run() })
			s.tmux("set-option", "-g", "status", "off")

			s.waitScreen("~$") // bash's prompt (capture-pane trims the space after it)
			s.tmux("send-keys", "-t", s.name, "stty size", "Enter")
			s.waitScreen("30 100")
			s.tmux("resize-window", "-t", s.name, "-x", "120", "-y", "40")
			s.tmux("send-keys", "-t", s.name, "clear; stty size", "Enter")
			s.waitScreen("40 120")

			// Ctrl-C reaches the sandbox: it interrupts the remote sleep,
			// not the CLI.
			s.tmux("send-keys", "-t", s.name, "sleep 100", "Enter")
			time.Sleep(300 * time.Millisecond)
			s.tmux("send-keys", "-t", s.name, "C-c")
			s.tmux("send-keys", "-t", s.name, "echo after-$((20+22))", "Enter")
			s.waitScreen("after-42")

			s.tmux("send-keys", "-t", s.name, "python3", "Enter")
			s.waitScreen(">>>")
			s.tmux("send-keys", "-t", s.name, "6*7", "Enter")
			s.waitScreen("\n42\n")
			s.tmux("send-keys", "-t", s.name, "exit()", "Enter")
			s.tmux("send-keys", "-t", s.name, "exit 3", "Enter")
			eventually(t, 20*time.Second, "the CLI to exit", func() bool {
				b, _ := os.ReadFile(exitFile)
				return strings.TrimSpace(string(b)) != ""
			})
			if b, _ := os.ReadFile(exitFile); strings.TrimSpace(string(b)) != "3" {
				t.Errorf("airlock shell exited with %q, want 3; screen:\n%s", b, s.capture())
			}
		})
	}
}
