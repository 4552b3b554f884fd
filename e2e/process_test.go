package e2e

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/client"
)

// lockedBuffer is a bytes.Buffer that may be read while another goroutine
// writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *lockedBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *lockedBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// eventually polls cond every 20 ms until it holds, failing after d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// otherClient opens the sandbox through a second client with its own
// connection pool, as a different program would.
func otherClient(t *testing.T, d *daemon, id string) *client.Sandbox {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := client.New("http://"+d.addr, client.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := c.Sandbox(testCtx(t, 30*time.Second), id)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

func exitCodeOf(p *api.Process) int {
	if p == nil || p.ExitCode == nil {
		return -1
	}
	return *p.ExitCode
}

func TestProcesses(t *testing.T) {
	d := startDaemon(t, "")
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt})
			sb2 := otherClient(t, d, sb.ID)
			ctx := testCtx(t, 2*time.Minute)

			t.Run("reattach from another client", func(t *testing.T) {
				p, err := sb.StartProcess(ctx, api.StartProcessRequest{Tag: "counter",
					Shell: "for i in 1 2 3 4 5; do echo line$i; sleep 0.1; done; echo oops >&2; exit 7"})
				if err != nil {
					t.Fatal(err)
				}
				if p.PID <= 0 || p.Tag != "counter" || !p.Running {
					t.Fatalf("started %+v", p)
				}
				time.Sleep(250 * time.Millisecond) // some output before anyone attaches
				var stdout, stderr bytes.Buffer
				got, err := sb2.AttachProcess(ctx, "counter", &stdout, &stderr)
				if err != nil {
					t.Fatal(err)
				}
				if want := "line1\nline2\nline3\nline4\nline5\n"; stdout.String() != want || stderr.String() != "oops\n" {
					t.Errorf("attach saw stdout %q stderr %q, want %q and %q", stdout.String(), stderr.String(), want, "oops\n")
				}
				if got.Running || exitCodeOf(got) != 7 || got.PID != p.PID {
					t.Errorf("attach ended with %+v, want pid %d exit 7", got, p.PID)
				}
				// The status was read; the entry stays for a grace period
				// and a third look by pid still gets everything.
				stdout.Reset()
				again, err := sb.ProcessOutput(ctx, client.PIDSelector(p.PID), &stdout, nil)
				if err != nil || exitCodeOf(again) != 7 || !strings.HasPrefix(stdout.String(), "line1\n") {
					t.Errorf("output after exit: %+v %q %v", again, stdout.String(), err)
				}
				list, err := sb2.ListProcesses(ctx)
				if err != nil {
					t.Fatal(err)
				}
				i := slices.IndexFunc(list, func(q api.Process) bool { return q.PID == p.PID })
				if i < 0 || list[i].Running || exitCodeOf(&list[i]) != 7 || list[i].OutputBytes != 35 {
					t.Errorf("list = %+v, want pid %d exited 7 with 35 output bytes", list, p.PID)
				}
			})

			t.Run("no follow while running", func(t *testing.T) {
				p, err := sb.StartProcess(ctx, api.StartProcessRequest{Cmd: []string{"sh", "-c", "echo ready; exec sleep 60"}})
				if err != nil {
					t.Fatal(err)
				}
				defer sb.Kill(ctx, client.PIDSelector(p.PID))
				var out bytes.Buffer
				eventually(t, 10*time.Second, "ready", func() bool {
					out.Reset()
					got, err := sb2.ProcessOutput(ctx, client.PIDSelector(p.PID), &out, nil)
					if err != nil || !got.Running {
						t.Fatalf("no-follow output: %+v, %v", got, err)
					}
					return out.String() == "ready\n"
				})
			})

			t.Run("stdin round trip", func(t *testing.T) {
				p, err := sb.StartProcess(ctx, api.StartProcessRequest{Tag: "cat", Cmd: []string{"cat"}, Stdin: true})
				if err != nil {
					t.Fatal(err)
				}
				for _, chunk := range []string{"hello ", "world\n"} {
					if n, err := sb2.SendStdin(ctx, "cat", strings.NewReader(chunk)); err != nil || n != int64(len(chunk)) {
						t.Fatalf("send stdin %q: %d, %v", chunk, n, err)
					}
				}
				if err := sb.CloseStdin(ctx, "cat"); err != nil {
					t.Fatal(err)
				}
				var out bytes.Buffer
				got, err := sb.AttachProcess(ctx, client.PIDSelector(p.PID), &out, nil)
				if err != nil || out.String() != "hello world\n" || exitCodeOf(got) != 0 {
					t.Errorf("cat echoed %q, ended %+v, %v", out.String(), got, err)
				}
			})

			t.Run("signal", func(t *testing.T) {
				_, err := sb.StartProcess(ctx, api.StartProcessRequest{Tag: "trap",
					Shell: `trap 'echo got TERM; exit 3' TERM; echo ready; while :; do sleep 0.1; done`})
				if err != nil {
					t.Fatal(err)
				}
				out := &lockedBuffer{}
				done := make(chan *api.Process, 1)
				go func() {
					got, _ := sb2.AttachProcess(ctx, "trap", out, nil)
					done <- got
				}()
				eventually(t, 10*time.Second, "ready", func() bool { return strings.Contains(out.String(), "ready") })
				if err := sb.Signal(ctx, "trap", "TERM"); err != nil {
					t.Fatal(err)
				}
				got := <-done
				if exitCodeOf(got) != 3 || !strings.Contains(out.String(), "got TERM") {
					t.Errorf("after TERM: %+v, output %q", got, out.String())
				}
			})

			t.Run("detaching does not kill", func(t *testing.T) {
				_, err := sb.StartProcess(ctx, api.StartProcessRequest{Tag: "survivor", Shell: "echo start; sleep 1; echo alive"})
				if err != nil {
					t.Fatal(err)
				}
				actx, cancel := context.WithCancel(ctx)
				out := &lockedBuffer{}
				detached := make(chan error, 1)
				go func() {
					_, err := sb2.AttachProcess(actx, "survivor", out, nil)
					detached <- err
				}()
				eventually(t, 10*time.Second, "start", func() bool { return strings.Contains(out.String(), "start") })
				cancel()
				if err := <-detached; err == nil {
					t.Fatal("attach returned no error after its context was cancelled")
				}
				var all bytes.Buffer
				got, err := sb.AttachProcess(ctx, "survivor", &all, nil)
				if err != nil || all.String() != "start\nalive\n" || exitCodeOf(got) != 0 {
					t.Errorf("after detach: %q, %+v, %v", all.String(), got, err)
				}
			})

			t.Run("kill removes the tree", func(t *testing.T) {
				p, err := sb.StartProcess(ctx, api.StartProcessRequest{Tag: "tree",
					Shell: "sleep 1000 & sleep 1000 & setsid sleep 1000 & echo started; wait"})
				if err != nil {
					t.Fatal(err)
				}
				count := func() int {
					res, err := sb.Exec(ctx, api.ExecRequest{Shell: `ps -o args | grep -c '^sleep 1000'`})
					if err != nil {
						t.Fatal(err)
					}
					n := strings.TrimSpace(res.Stdout)
					return int(n[0] - '0')
				}
				eventually(t, 10*time.Second, "3 sleeps", func() bool { return count() == 3 })
				got, err := sb2.Kill(ctx, "tree")
				if err != nil || got.Running || got.Signal != "KILL" || got.PID != p.PID {
					t.Fatalf("kill = %+v, %v", got, err)
				}
				eventually(t, 10*time.Second, "no sleeps", func() bool { return count() == 0 })
			})

			t.Run("errors", func(t *testing.T) {
				if _, err := sb.StartProcess(ctx, api.StartProcessRequest{Tag: "held", Cmd: []string{"sleep", "60"}}); err != nil {
					t.Fatal(err)
				}
				defer sb.Kill(ctx, "held")
				_, errTag := sb.StartProcess(ctx, api.StartProcessRequest{Tag: "held", Cmd: []string{"true"}})
				_, errNumeric := sb.StartProcess(ctx, api.StartProcessRequest{Tag: "42", Cmd: []string{"true"}})
				_, errNoCmd := sb.StartProcess(ctx, api.StartProcessRequest{})
				_, errMissing := sb.AttachProcess(ctx, "99999", nil, nil)
				_, errNoTag := sb.Kill(ctx, "nobody")
				for _, tc := range []struct {
					name      string
					err, want error
				}{
					{"tag in use", errTag, client.ErrConflict},
					{"numeric tag", errNumeric, client.ErrInvalidArgument},
					{"no command", errNoCmd, client.ErrInvalidArgument},
					{"unknown pid", errMissing, client.ErrNotFound},
					{"unknown tag", errNoTag, client.ErrNotFound},
					{"bad signal", sb.Signal(ctx, "held", "BOGUS"), client.ErrInvalidArgument},
					{"stdin not open", sb.CloseStdin(ctx, "held"), client.ErrInvalidArgument},
				} {
					if !errors.Is(tc.err, tc.want) {
						t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
					}
				}
			})
		})
	}
}

// TestProcessAttachLatency measures how long a new client takes to attach
// to a running process and get its buffered output and status (median of
// 30, logged; run with -v).
func TestProcessAttachLatency(t *testing.T) {
	d := startDaemon(t, "")
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt})
			ctx := testCtx(t, 2*time.Minute)
			p, err := sb.StartProcess(ctx, api.StartProcessRequest{Tag: "srv", Shell: "echo ready; exec sleep 600"})
			if err != nil {
				t.Fatal(err)
			}
			defer sb.Kill(ctx, "srv")
			var samples []time.Duration
			for range 30 {
				var out bytes.Buffer
				began := time.Now()
				got, err := sb.ProcessOutput(ctx, client.PIDSelector(p.PID), &out, nil)
				samples = append(samples, time.Since(began))
				if err != nil || !got.Running {
					t.Fatalf("attach: %+v, %v", got, err)
				}
			}
			sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
			t.Logf("%s: attach (GET .../output?follow=false, buffered output + status) median %v, min %v, max %v",
				rt, samples[len(samples)/2], samples[0], samples[len(samples)-1])
		})
	}
}
