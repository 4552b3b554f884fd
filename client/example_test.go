package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/client"
)

// These examples need a running daemon, so they are compiled but not run.

func ExampleNew() {
	c, err := client.New("http://127.0.0.1:7878", client.WithUserAgent("my-agent/1.0"))
	if err != nil {
		log.Fatal(err)
	}
	info, err := c.Info(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.Version, info.Runtimes)
}

func ExampleClient_CreateSandbox() {
	ctx := context.Background()
	c, err := client.FromEnv()
	if err != nil {
		log.Fatal(err)
	}
	sb, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{
		Template:       "base",
		Runtime:        api.RuntimeGVisor,
		MemoryMB:       1024,
		TimeoutSeconds: 600,
		Labels:         map[string]string{"task": "demo"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Delete(ctx)

	res, err := sb.Exec(ctx, api.ExecRequest{Shell: "uname -a && id"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(res.Stdout)
}

func ExampleSandbox_ExecStream() {
	ctx := context.Background()
	c, _ := client.FromEnv()
	sb, err := c.Sandbox(ctx, "sb-0123456789")
	if err != nil {
		log.Fatal(err)
	}
	res, err := sb.ExecStream(ctx, api.ExecRequest{
		Cmd:            []string{"python3", "-c", "import time\nfor i in range(3): print(i, flush=True); time.sleep(1)"},
		TimeoutSeconds: 30,
	}, os.Stdout, os.Stderr)
	if err != nil {
		log.Fatal(err)
	}
	if res.TimedOut {
		fmt.Println("timed out")
	}
	fmt.Println("exit code:", res.ExitCode)
}

func ExampleSandbox_Upload() {
	ctx := context.Background()
	c, _ := client.FromEnv()
	sb, err := c.Sandbox(ctx, "sb-0123456789")
	if err != nil {
		log.Fatal(err)
	}
	// Small content from memory...
	if _, err := sb.Upload(ctx, "/home/user/hello.sh", strings.NewReader("echo hello\n"), 0o755); err != nil {
		log.Fatal(err)
	}
	// ...or a large file, streamed from disk.
	f, err := os.Open("dataset.csv")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	n, err := sb.Upload(ctx, "/home/user/dataset.csv", f, 0o644)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("uploaded", n, "bytes")
}

func ExampleSandbox_Download() {
	ctx := context.Background()
	c, _ := client.FromEnv()
	sb, err := c.Sandbox(ctx, "sb-0123456789")
	if err != nil {
		log.Fatal(err)
	}
	f, err := os.Create("report.pdf")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	if _, err := sb.Download(ctx, "/home/user/report.pdf", f); err != nil {
		log.Fatal(err)
	}
}

func ExampleSandbox_SetTimeout() {
	ctx := context.Background()
	c, _ := client.FromEnv()
	sb, err := c.Sandbox(ctx, "sb-0123456789")
	if err != nil {
		log.Fatal(err)
	}
	if err := sb.SetTimeout(ctx, 30*time.Minute); err != nil {
		log.Fatal(err)
	}
	fmt.Println("expires at", sb.ExpiresAt)
}

func ExampleClient_RunStream() {
	ctx := context.Background()
	c, _ := client.FromEnv()
	res, err := c.RunStream(ctx, api.RunRequest{
		Sandbox: api.CreateSandboxRequest{Runtime: api.RuntimeRunc},
		Exec:    api.ExecRequest{Shell: "echo one-shot; exit 3"},
	}, os.Stdout, os.Stderr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("sandbox", res.SandboxID, "exited with", res.ExitCode)
}

func ExampleAPIError() {
	ctx := context.Background()
	c, _ := client.FromEnv()
	_, err := c.Sandbox(ctx, "sb-does-not-exist")
	var apiErr *client.APIError
	switch {
	case errors.Is(err, client.ErrNotFound):
		fmt.Println("no such sandbox")
	case errors.As(err, &apiErr):
		fmt.Println("daemon error:", apiErr.Code, apiErr.Message)
	case err != nil:
		fmt.Println("transport error:", err)
	}
}
