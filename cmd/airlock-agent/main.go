// Command airlock-agent runs as PID 1 inside every Airlock sandbox. It
// dials the daemon and serves the agent protocol (docs/AGENT_PROTOCOL.md),
// redialing whenever the connection is lost, and reaps every orphan in the
// sandbox meanwhile.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/airlockdev/airlock/internal/agent"
)

const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = time.Second
	// stableSession is how long a session must last for the next dial to
	// start again from minBackoff: a daemon that accepts and immediately
	// drops us must not be redialed in a tight loop.
	stableSession = time.Second
)

func main() {
	agent.RunShimIfRequested() // every exec runs under a copy of this binary
	dial := flag.String("dial", "unix:/.airlock/run/agent.sock", "daemon address: unix:PATH or tcp:HOST:PORT")
	user := flag.String("user", "user", "default user for execs and created files")
	nproc := flag.Uint64("nproc", 0, "RLIMIT_NPROC of every exec (0: unset); for runtimes whose host pids cgroup cannot stop a fork bomb gracefully")
	flag.Parse()
	logger := log.New(os.Stderr, "airlock-agent: ", log.LstdFlags)

	network, addr, err := parseDial(*dial)
	if err != nil {
		logger.Fatal(err)
	}
	if os.Getpid() == 1 {
		// No host descriptor may stay reachable through /proc/1/fd.
		if err := agent.DetachStdio(); err != nil {
			logger.Fatal(err)
		}
	}

	// Catching SIGPIPE (rather than ignoring it) keeps a write to a closed
	// stderr from killing PID 1, while children still start with the
	// default disposition: an ignored signal would be inherited across
	// exec and break pipelines like `yes | head`.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	// SIGTERM/SIGINT stop the agent (and so the sandbox, when PID 1): the
	// runtime's graceful stop then does not have to wait for SIGKILL.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	agent.ReserveThreads(32)
	a := agent.New(agent.Config{DefaultUser: *user, Logger: logger, NprocLimit: *nproc})
	run(ctx, logger, a, network, addr)
}

// run dials the daemon and serves each connection until ctx ends.
func run(ctx context.Context, logger *log.Logger, a *agent.Agent, network, addr string) {
	var d net.Dialer
	backoff := minBackoff
	for first := true; ctx.Err() == nil; first = false {
		if !first && !sleep(ctx, backoff) {
			return
		}
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			backoff = min(2*backoff, maxBackoff)
			continue // the daemon is not listening (yet); not worth a log line
		}
		logger.Printf("connected to %s", addr)
		start := time.Now()
		err = agent.Serve(ctx, conn, a)
		conn.Close()
		if ctx.Err() == nil {
			logger.Printf("disconnected: %v", err)
		}
		if time.Since(start) >= stableSession {
			backoff = minBackoff
		} else {
			backoff = min(2*backoff, maxBackoff)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// parseDial splits "unix:/path" or "tcp:host:port".
func parseDial(s string) (network, addr string, err error) {
	network, addr, ok := strings.Cut(s, ":")
	if !ok || addr == "" {
		return "", "", fmt.Errorf("--dial %q: want unix:PATH or tcp:HOST:PORT", s)
	}
	switch network {
	case "unix", "tcp":
		return network, addr, nil
	}
	return "", "", errors.New("--dial: network must be unix or tcp, got " + network)
}
