package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/airlockdev/airlock/client"
)

func newShellCmd(a *app) *cobra.Command {
	var (
		opts   client.PTYOptions
		env    = newKVFlag()
		attach string
	)
	cmd := &cobra.Command{
		Use:   "shell [flags] ID [-- CMD [ARGS...]]",
		Short: "Open an interactive terminal in a sandbox",
		Long: "Open an interactive terminal in a sandbox, like 'docker exec -it': the user's login shell,\n" +
			"or CMD, on a pseudo-terminal. The local terminal is put in raw mode, so every key,\n" +
			"Ctrl-C included, goes to the sandbox; window size changes follow. airlock exits with\n" +
			"the remote command's exit code. If the connection drops, the session keeps running\n" +
			"and 'airlock shell --attach PID ID' returns to it.",
		Example: "  airlock shell sb-123\n" +
			"  airlock shell --user root --cwd /srv sb-123\n" +
			"  airlock shell sb-123 -- python3",
		Args: argsUsage(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			argv := args[1:]
			if len(argv) > 0 && argv[0] == "--" {
				argv = argv[1:]
			}
			if attach != "" && (len(argv) > 0 || opts.User != "" || opts.Cwd != "" || opts.Tag != "" || len(env.Map()) > 0) {
				return usagef("--attach cannot be combined with a command, --user, --cwd, --env or --tag")
			}
			in, ok := cmd.InOrStdin().(*os.File)
			if !ok || !term.IsTerminal(int(in.Fd())) {
				return usagef("the input is not a terminal: airlock shell needs one (to pipe input, use 'airlock exec -i ID CMD')")
			}
			opts.Cmd, opts.Env, opts.Attach = argv, env.Map(), attach
			return runShell(cmd, a, args[0], in, opts)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&opts.User, "user", "u", "", "user name or uid to run as (default: the template's user)")
	fs.StringVarP(&opts.Cwd, "cwd", "w", "", "working directory, absolute (default: the user's home)")
	fs.VarP(env, "env", "e", "set an environment variable (repeatable)")
	fs.StringVar(&opts.Tag, "tag", "", "a name for the session, usable instead of its pid")
	fs.StringVar(&attach, "attach", "", "reattach to a running terminal session by pid or tag")
	fs.SetInterspersed(false)
	return cmd
}

// runShell runs one terminal session with the local terminal in raw mode.
func runShell(cmd *cobra.Command, a *app, id string, in *os.File, opts client.PTYOptions) error {
	ctx := cmd.Context()
	sb, err := a.sandbox(ctx, id)
	if err != nil {
		return err
	}
	fd := int(in.Fd())
	if cols, rows, err := term.GetSize(fd); err == nil {
		opts.Cols, opts.Rows = cols, rows
	}
	pty, err := sb.PTY(ctx, opts)
	if err != nil {
		return err
	}
	defer pty.Close()
	state, err := term.MakeRaw(fd)
	if err != nil {
		return fmt.Errorf("put the terminal in raw mode: %w", err)
	}
	restored := false
	restore := func() {
		if !restored {
			term.Restore(fd, state)
			restored = true
		}
	}
	defer restore()

	// Resize on SIGWINCH; a hangup or SIGTERM ends the session like a
	// closed terminal would, instead of leaving it running unseen.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGWINCH, syscall.SIGHUP, syscall.SIGTERM)
	defer signal.Stop(sigs)
	hangup := make(chan int, 1)
	go func() {
		for s := range sigs {
			if s != syscall.SIGWINCH {
				hangup <- 128 + int(s.(syscall.Signal))
				return
			}
			if cols, rows, err := term.GetSize(fd); err == nil {
				pty.Resize(ctx, cols, rows)
			}
		}
	}()
	// Reading the terminal blocks until a key is pressed, so this copy
	// may outlive the session by one read; its bytes then go nowhere.
	go io.Copy(pty, in)
	copied := make(chan struct{})
	go func() {
		io.Copy(cmd.OutOrStdout(), pty)
		close(copied)
	}()

	select {
	case <-copied:
	case code := <-hangup:
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		sb.Kill(kctx, strconv.Itoa(pty.PID()))
		cancel()
		return exitCode(code)
	}
	code, err := pty.Wait(ctx)
	restore()
	if errors.Is(err, client.ErrDetached) {
		return fmt.Errorf("%w; the session (pid %d) keeps running: airlock shell --attach %d %s", err, pty.PID(), pty.PID(), id)
	}
	if err != nil {
		return err
	}
	if code != 0 {
		return exitCode(code)
	}
	return nil
}
