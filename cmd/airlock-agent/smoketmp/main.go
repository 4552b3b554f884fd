package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/airlockdev/airlock/internal/agentproto"
)

func main() {
	dir, _ := os.MkdirTemp("", "smoke")
	sock := filepath.Join(dir, "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		panic(err)
	}
	cmd := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "/tmp/airlock-agent", "--dial", "unix:"+sock, "--user", "root")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for round := 0; round < 2; round++ {
		conn, err := l.Accept()
		if err != nil {
			panic(err)
		}
		c, _ := agentproto.NewClient(conn)
		rep, err := c.Hello(ctx)
		fmt.Printf("hello: %+v %v\n", rep, err)
		run := func(argv ...string) {
			var out, errb bytes.Buffer
			st, err := c.Exec(ctx, agentproto.Request{Argv: argv}, agentproto.ExecIO{Stdout: &out, Stderr: &errb})
			fmt.Printf("%v -> %+v %v\n%s%s", argv, st, err, out.String(), errb.String())
		}
		run("sh", "-c", "for i in 1 2 3 4 5; do (sleep 0.1 &) ; done; sleep 0.1 & echo started")
		time.Sleep(500 * time.Millisecond)
		run("ps", "-eo", "pid,ppid,stat,comm")
		run("sh", "-c", "yes | head -c 5; echo")
		c.Close()
	}
}
