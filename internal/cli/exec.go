package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/airlockdev/airlock/api"
)

// execFlags are the flags exec and run share.
type execFlags struct {
	env     *kvFlag
	cwd     string
	user    string
	timeout durationFlag
	shell   bool
	stdin   bool
}

func (f *execFlags) register(fs *pflag.FlagSet) {
	f.env = newKVFlag()
	fs.VarP(f.env, "env", "e", "set an environment variable for the command (repeatable)")
	fs.StringVarP(&f.cwd, "cwd", "w", "", "working directory, absolute (default: the user's home)")
	fs.StringVarP(&f.user, "user", "u", "", "user name or uid to run as (default: the template's user)")
	fs.Var(&f.timeout, "timeout", "kill the command after this long, e.g. 30s, 10m, or seconds (default: the daemon's, 5m)")
	fs.BoolVar(&f.shell, "shell", false, "run the arguments, joined by spaces, as a /bin/sh -c script")
	fs.BoolVarP(&f.stdin, "stdin", "i", false, "read all of local stdin and pass it to the command")
	// Flags belong to airlock only up to the first argument: everything
	// after is the command's, e.g. `airlock exec ID ls -la`.
	fs.SetInterspersed(false)
}

// request builds the exec request for argv.
func (f *execFlags) request(cmd *cobra.Command, argv []string) (api.ExecRequest, error) {
	req := api.ExecRequest{
		Env:            f.env.Map(),
		Cwd:            f.cwd,
		User:           f.user,
		TimeoutSeconds: f.timeout.d.Seconds(),
	}
	if f.shell {
		req.Shell = strings.Join(argv, " ")
	} else {
		req.Cmd = argv
	}
	if f.stdin {
		b, err := io.ReadAll(cmd.InOrStdin())
		if err != nil {
			return req, fmt.Errorf("read stdin: %w", err)
		}
		req.Stdin = b
	}
	return req, nil
}

// commandArgs drops a leading "--" that separates airlock's arguments
// from the command's, and requires a command.
func commandArgs(args []string) ([]string, error) {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		return nil, usagef("no command given")
	}
	return args, nil
}

// finish reports how a command ended: it passes its exit code on, and says
// so on stderr when it was killed for running too long.
func finish(cmd *cobra.Command, res api.ExecResult) error {
	if res.TimedOut {
		fmt.Fprintln(cmd.ErrOrStderr(), "airlock: command timed out")
	}
	if res.OOMKilled {
		fmt.Fprintln(cmd.ErrOrStderr(), "airlock: command killed: the sandbox ran out of memory")
	}
	if res.ExitCode != 0 {
		return exitCode(res.ExitCode)
	}
	if res.TimedOut || res.Signal != "" {
		return exitCode(1) // killed, yet no code: never report success
	}
	return nil
}

func newExecCmd(a *app) *cobra.Command {
	var f execFlags
	var d detachFlags
	cmd := &cobra.Command{
		Use:   "exec [flags] ID [--] CMD [ARGS...]",
		Short: "Run a command in a sandbox",
		Long: "Run a command in a sandbox, streaming its stdout and stderr, and exit with its exit code.\n" +
			"Flags go before ID; everything after ID belongs to the command.",
		Example: "  airlock exec sb-123 python3 -c 'print(42)'\n" +
			"  airlock exec --env DEBUG=1 --cwd /tmp sb-123 -- ls -la\n" +
			"  airlock exec --shell sb-123 'cd /srv && make test | tail -5'\n" +
			"  echo hi | airlock exec -i sb-123 cat\n" +
			"  airlock exec -d --tag web sb-123 python3 -m http.server",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("requires a sandbox ID and a command")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			argv, err := commandArgs(args[1:])
			if err != nil {
				return err
			}
			if d.detach || d.tag != "" {
				return d.run(cmd, a, args[0], argv, &f)
			}
			ctx := cmd.Context()
			sb, err := a.sandbox(ctx, args[0])
			if err != nil {
				return err
			}
			req, err := f.request(cmd, argv)
			if err != nil {
				return err
			}
			res, err := sb.ExecStream(ctx, req, cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return finish(cmd, *res)
		},
	}
	f.register(cmd.Flags())
	d.register(cmd)
	return cmd
}

func newRunCmd(a *app) *cobra.Command {
	var (
		f        execFlags
		rt       runtimeFlag
		template string
		lang     string
		cf       codeFlags
	)
	cmd := &cobra.Command{
		Use:   "run [flags] [--] CMD [ARGS...]",
		Short: "Run a command in a new sandbox, then delete it",
		Long: "Create a sandbox, run one command in it streaming its output, delete the sandbox,\n" +
			"and exit with the command's exit code.",
		Example: "  airlock run python3 -c 'import sys; print(sys.version)'\n" +
			"  airlock run --runtime runc --timeout 2m -- sh -c 'uname -a'\n" +
			"  airlock run --lang python 'import sys; sys.version'",
		Args: argsUsage(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if lang != "" {
				sreq := api.CreateSandboxRequest{Runtime: rt.v, Template: template}
				return runCodeOnce(cmd, a, sreq, lang, &f, &cf, args)
			}
			argv, err := commandArgs(args)
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			ereq, err := f.request(cmd, argv)
			if err != nil {
				return err
			}
			req := api.RunRequest{
				Sandbox: api.CreateSandboxRequest{Runtime: rt.v, Template: template},
				Exec:    ereq,
			}
			if f.timeout.d > 0 {
				// Keep the sandbox alive for as long as the command may run.
				req.Sandbox.TimeoutSeconds = ceilSeconds(f.timeout.d) + 60
			}
			res, err := c.RunStream(cmd.Context(), req, cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return finish(cmd, res.ExecResult)
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().Var(&rt, "runtime", "sandbox runtime: gvisor or runc (default: the daemon's)")
	cmd.Flags().StringVar(&template, "template", "", "template to start from (default: base)")
	cmd.Flags().StringVarP(&lang, "lang", "l", "", "run the arguments as code in this language (python, javascript, bash), like 'airlock code'")
	cf.register(cmd.Flags(), false)
	return cmd
}
