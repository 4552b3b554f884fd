package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// TestMain fails the run if any child of the test process is left: every
// exec must have been reaped by the agent's reaper.
func TestMain(m *testing.M) {
	RunShimIfRequested() // the test binary is the exec shim of its agents
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(5 * time.Second)
		for {
			left := descendants(os.Getpid())
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				fmt.Fprintf(os.Stderr, "processes left behind: %v\n", left)
				code = 1
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	os.Exit(code)
}

// testTimeout bounds every test's operations.
const testTimeout = 30 * time.Second

// socketPair returns two connected unix stream sockets, closer to the
// production transport than net.Pipe.
func socketPair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]net.Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), fmt.Sprintf("socketpair-%d", i))
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	return conns[0], conns[1]
}

// serve runs an agent (execs as root by default) on one end of a socket
// pair and returns the other end.
func serve(t *testing.T, cfg Config) net.Conn {
	t.Helper()
	if cfg.DefaultUser == "" {
		cfg.DefaultUser = "root"
	}
	agentEnd, daemonEnd := socketPair(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, agentEnd, New(cfg)) }()
	t.Cleanup(func() {
		daemonEnd.Close()
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return")
		}
		agentEnd.Close()
	})
	return daemonEnd
}

// newClient starts an agent and returns the daemon's client to it.
func newClient(t *testing.T) *agentproto.Client {
	t.Helper()
	c, err := agentproto.NewClient(serve(t, Config{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// rawStream opens a stream to a fresh agent and sends req, for protocol
// features the client does not expose (control frames, bad requests).
func rawStream(t *testing.T, req any) *yamux.Stream {
	t.Helper()
	sess, err := yamux.Client(serve(t, Config{}), agentproto.MuxConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	s, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	_ = s.SetDeadline(time.Now().Add(testTimeout))
	if err := agentproto.WriteJSON(s, agentproto.FrameRequest, req); err != nil {
		t.Fatal(err)
	}
	return s
}

// readReply reads frames until a reply, skipping output.
func readReply(t *testing.T, s *yamux.Stream) agentproto.Reply {
	t.Helper()
	for {
		f, err := agentproto.ReadFrame(s)
		if err != nil {
			t.Fatalf("read frame: %v", err)
		}
		if f.Type != agentproto.FrameReply {
			continue
		}
		var rep agentproto.Reply
		if err := f.Decode(&rep); err != nil {
			t.Fatal(err)
		}
		return rep
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func TestHello(t *testing.T) {
	c, err := agentproto.NewClient(serve(t, Config{Hostname: "box"}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rep, err := c.Hello(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Version != agentproto.Version || rep.AgentPID != os.Getpid() || rep.Hostname != "box" {
		t.Fatalf("hello = %+v", rep)
	}
}

func TestBadRequests(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  any
	}{
		{"unknown op", agentproto.Request{Op: "frobnicate"}},
		{"empty argv", agentproto.Request{Op: agentproto.OpExec}},
		{"not a request", map[string]any{"op": 42}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := readReply(t, rawStream(t, tc.req))
			if rep.Error == nil || !errors.Is(rep.Error, errdefs.ErrInvalidArgument) {
				t.Fatalf("reply = %+v, want invalid_argument", rep)
			}
		})
	}
}

func TestFirstFrameMustBeRequest(t *testing.T) {
	sess, err := yamux.Client(serve(t, Config{}), agentproto.MuxConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	s, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	_ = s.SetDeadline(time.Now().Add(testTimeout))
	if err := agentproto.WriteFrame(s, agentproto.FrameData, []byte("x")); err != nil {
		t.Fatal(err)
	}
	rep := readReply(t, s)
	if rep.Error == nil || !strings.Contains(rep.Error.Message, "request") {
		t.Fatalf("reply = %+v", rep)
	}
}

func TestServeReturnsWhenConnectionCloses(t *testing.T) {
	agentEnd, daemonEnd := socketPair(t)
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), agentEnd, New(Config{})) }()
	daemonEnd.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Serve returned nil for a dead connection")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
}
