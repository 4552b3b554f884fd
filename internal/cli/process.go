package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlockdev/airlock/api"
)

func newPsCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ps ID",
		Short: "List a sandbox's background processes",
		Args:  argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			sb, err := a.sandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			ps, err := sb.ListProcesses(cmd.Context())
			if err != nil {
				return err
			}
			if ps == nil {
				ps = []api.Process{}
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), api.ProcessList{Processes: ps})
			}
			now := time.Now()
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 3, ' ', 0)
			fmt.Fprintln(tw, "PID\tTAG\tSTATUS\tSTARTED\tCOMMAND")
			for _, p := range ps {
				tag := p.Tag
				if tag == "" {
					tag = "-"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", p.PID, tag, processStatus(p), ago(p.StartedAt, now), strings.Join(p.Cmd, " "))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// processStatus renders "running", "running (pty)", "exited (3)" or
// "killed (KILL)".
func processStatus(p api.Process) string {
	switch {
	case p.Running && p.PTY:
		return "running (pty)"
	case p.Running:
		return "running"
	case p.Signal != "":
		return "killed (" + p.Signal + ")"
	case p.ExitCode != nil:
		return fmt.Sprintf("exited (%d)", *p.ExitCode)
	}
	return "exited"
}

func newAttachCmd(a *app) *cobra.Command {
	var noFollow bool
	cmd := &cobra.Command{
		Use:   "attach ID PID|TAG",
		Short: "Print a background process's output and follow it until it exits",
		Long: "Print everything a background process wrote that is still buffered (its last 1 MiB),\n" +
			"then follow its output until it exits, and exit with its exit code. Ctrl-C detaches\n" +
			"and leaves the process running.",
		Args: argsUsage(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			sb, err := a.sandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			attach := sb.AttachProcess
			if noFollow {
				attach = sb.ProcessOutput
			}
			p, err := attach(cmd.Context(), args[1], cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			if p.Running {
				return nil
			}
			return finishProcess(*p)
		},
	}
	cmd.Flags().BoolVar(&noFollow, "no-follow", false, "print what is buffered and return without waiting")
	return cmd
}

// finishProcess passes an exited process's status on as the exit code.
func finishProcess(p api.Process) error {
	switch {
	case p.ExitCode != nil && *p.ExitCode != 0:
		return exitCode(*p.ExitCode)
	case p.Signal != "":
		return exitCode(1)
	}
	return nil
}

func newKillCmd(a *app) *cobra.Command {
	var sig string
	cmd := &cobra.Command{
		Use:   "kill [--signal S] ID PID|TAG",
		Short: "Kill a background process and everything it started, or send it a signal",
		Example: "  airlock kill sb-123 web\n" +
			"  airlock kill --signal INT sb-123 4242",
		Args: argsUsage(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			sb, err := a.sandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if sig != "" {
				return sb.Signal(cmd.Context(), args[1], sig)
			}
			p, err := sb.Kill(cmd.Context(), args[1])
			if err != nil {
				return err
			}
			if p.Running {
				return fmt.Errorf("process %d is still running after SIGKILL", p.PID)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&sig, "signal", "s", "", "send this signal (TERM, INT, HUP, 9, ...) to the process group instead of killing the tree")
	return cmd
}

// detachFlags are exec's flags for starting a background process.
type detachFlags struct {
	detach bool
	tag    string
}

func (d *detachFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&d.detach, "detach", "d", false, "start the command in the background, print its pid and return")
	cmd.Flags().StringVar(&d.tag, "tag", "", "with --detach: a name for the process, usable instead of its pid")
}

// run starts argv in the background and prints the pid.
func (d *detachFlags) run(cmd *cobra.Command, a *app, id string, argv []string, f *execFlags) error {
	switch {
	case !d.detach:
		return usagef("--tag needs --detach")
	case f.stdin:
		return usagef("--stdin cannot be combined with --detach")
	case f.timeout.d != 0:
		return usagef("--timeout cannot be combined with --detach; stop the process with 'airlock kill'")
	}
	req, err := f.request(cmd, argv)
	if err != nil {
		return err
	}
	sb, err := a.sandbox(cmd.Context(), id)
	if err != nil {
		return err
	}
	p, err := sb.StartProcess(cmd.Context(), api.StartProcessRequest{
		Cmd: req.Cmd, Shell: req.Shell, Env: req.Env, Cwd: req.Cwd, User: req.User, Tag: d.tag,
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(cmd.OutOrStdout(), p.PID)
	return nil
}
