// Package cli is the airlock command: the daemon (airlock serve) and a
// client for everything else, built on the public Go SDK.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/airlockdev/airlock/client"
)

// Version is the airlock version, set at build time with
// -ldflags "-X github.com/airlockdev/airlock/internal/cli.Version=v1.2.3".
var Version = "dev"

// Main runs the airlock command with os.Args and returns the exit status.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// After the first signal, restore the default handling so a second
		// Ctrl-C kills a command that is slow to wind down.
		<-ctx.Done()
		stop()
	}()
	return run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}

// run executes the command line args and returns the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	var ec exitCode
	if errors.As(err, &ec) {
		return int(ec)
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "airlock: interrupted")
		return 130
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "airlock: %v\nRun '%s --help' for usage.\n", err, cmd.CommandPath())
		return 2
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		host, _ := root.PersistentFlags().GetString("host")
		fmt.Fprintf(stderr, "airlock: cannot reach the daemon at %s (is 'airlock serve' running?): %v\n", host, err)
		return 1
	}
	fmt.Fprintf(stderr, "airlock: %v\n", err)
	return 1
}

// exitCode ends the command with a status and no message, as when exec
// passes on the remote command's exit code.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// usageError is a command line mistake: bad flags or arguments.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// argsUsage wraps a cobra argument validator so its errors count as usage
// errors.
func argsUsage(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := v(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// app holds what the client commands share.
type app struct {
	host string
}

// client connects to the daemon named by --host.
func (a *app) client() (*client.Client, error) {
	opts := []client.Option{client.WithUserAgent("airlock-cli/" + version())}
	if key := os.Getenv("AIRLOCK_API_KEY"); key != "" {
		opts = append(opts, client.WithAPIKey(key))
	}
	return client.New(a.host, opts...)
}

// sandbox connects and looks up one sandbox.
func (a *app) sandbox(ctx context.Context, id string) (*client.Sandbox, error) {
	c, err := a.client()
	if err != nil {
		return nil, err
	}
	return c.Sandbox(ctx, id)
}

func newRootCmd() *cobra.Command {
	a := &app{}
	root := &cobra.Command{
		Use:   "airlock",
		Short: "Self-hosted sandboxes for AI agents",
		Long: "Airlock runs isolated sandboxes (gVisor or runc) for AI agents to execute code in.\n\n" +
			"Start the daemon with 'airlock serve'; the other commands talk to it at --host\n" +
			"(default $AIRLOCK_HOST, else " + client.DefaultHost + ").",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Completion needs a shell-specific setup; keep the command list short.
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: true},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	defHost := os.Getenv("AIRLOCK_HOST")
	if defHost == "" {
		defHost = client.DefaultHost
	}
	root.PersistentFlags().StringVar(&a.host, "host", defHost, "daemon address (env AIRLOCK_HOST)")

	root.AddCommand(
		newServeCmd(),
		newCreateCmd(a),
		newExecCmd(a),
		newShellCmd(a),
		newPsCmd(a),
		newAttachCmd(a),
		newKillCmd(a),
		newRunCmd(a),
		newCodeCmd(a),
		newContextCmd(a),
		newCpCmd(a),
		newWatchCmd(a),
		newLsCmd(a),
		newInspectCmd(a),
		newRmCmd(a),
		newTimeoutCmd(a),
		newNetworkCmd(a),
		newSecretCmd(a),
		newTemplateCmd(a),
		newVersionCmd(),
	)
	return root
}

// version is Version, or the module version when built with go install.
func version() string {
	if Version != "dev" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return Version
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the airlock version",
		Args:  argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "airlock %s (%s %s/%s)\n", version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}
