// Package client is the Go SDK for the Airlock daemon's HTTP API.
//
// A Client talks to one daemon; sandboxes are values with methods to run
// commands in them and move files in and out:
//
//	c, err := client.New("http://127.0.0.1:7878") // or client.FromEnv()
//	if err != nil {
//		return err
//	}
//	sb, err := c.CreateSandbox(ctx, api.CreateSandboxRequest{
//		Runtime: api.RuntimeGVisor,
//		Labels:  map[string]string{"agent": "demo"},
//	})
//	if err != nil {
//		return err
//	}
//	defer sb.Delete(context.WithoutCancel(ctx))
//
//	if _, err := sb.Upload(ctx, "/tmp/main.py", strings.NewReader("print(6*7)\n"), 0o644); err != nil {
//		return err
//	}
//	res, err := sb.ExecStream(ctx, api.ExecRequest{Cmd: []string{"python3", "/tmp/main.py"}}, os.Stdout, os.Stderr)
//	if err != nil {
//		return err
//	}
//	fmt.Println("exit code", res.ExitCode)
//
// Errors reported by the daemon are *APIError values; test them with
// errors.Is against ErrNotFound, ErrInvalidArgument and the other
// sentinels:
//
//	if _, err := c.Sandbox(ctx, id); errors.Is(err, client.ErrNotFound) {
//		// gone: expired or deleted
//	}
//
// A command that runs but fails is not an error: check ExecResult.ExitCode
// and ExecResult.TimedOut.
package client
