package main

import (
	"context"
	"io"
	"log"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockdev/airlock/internal/agent"
	"github.com/airlockdev/airlock/internal/agentproto"
)

func TestParseDial(t *testing.T) {
	for _, tc := range []struct {
		in, network, addr string
		ok                bool
	}{
		{"unix:/.airlock/run/agent.sock", "unix", "/.airlock/run/agent.sock", true},
		{"tcp:127.0.0.1:7000", "tcp", "127.0.0.1:7000", true},
		{"tcp:[::1]:7000", "tcp", "[::1]:7000", true},
		{"/just/a/path", "", "", false},
		{"unix:", "", "", false},
		{"udp:1.2.3.4:5", "", "", false},
	} {
		network, addr, err := parseDial(tc.in)
		if (err == nil) != tc.ok || network != tc.network || addr != tc.addr {
			t.Errorf("parseDial(%q) = %q, %q, %v", tc.in, network, addr, err)
		}
	}
}

// TestRedial checks the agent finds a daemon that starts after it, and
// comes back by itself when the daemon drops the connection.
func TestRedial(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sock := filepath.Join(t.TempDir(), "agent.sock")
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx, log.New(io.Discard, "", 0), agent.New(agent.Config{}), "unix", sock)
	}()
	defer func() {
		cancel()
		<-done
	}()

	time.Sleep(300 * time.Millisecond) // the agent is dialing a missing socket
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	context.AfterFunc(ctx, func() { l.Close() })

	for i := range 3 {
		start := time.Now()
		conn, err := l.Accept()
		if err != nil {
			t.Fatalf("accept %d: %v", i, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("connection %d took %v", i, d)
		}
		c, err := agentproto.NewClient(conn)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Hello(ctx); err != nil {
			t.Fatalf("hello %d: %v", i, err)
		}
		c.Close() // the daemon "restarts"
	}
}
