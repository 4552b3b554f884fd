package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlockdev/airlock/api"
)

func newContextCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "context",
		Short: "Manage a sandbox's stateful code contexts (interpreters)",
		Long: "A code context is a live Python, JavaScript or Bash interpreter in a sandbox whose state\n" +
			"persists between runs of 'airlock code --context ID'.",
	}
	cmd.AddCommand(newContextCreateCmd(a), newContextLsCmd(a), newContextRestartCmd(a), newContextRmCmd(a))
	return cmd
}

func newContextCreateCmd(a *app) *cobra.Command {
	var (
		req    api.CreateContextRequest
		env    = newKVFlag()
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:     "create [flags] ID",
		Short:   "Start a code context and print its id",
		Example: "  ctx=$(airlock context create --lang python --cwd /work sb-123)\n  airlock code --context $ctx sb-123 'import os; os.getcwd()'",
		Args:    argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			sb, err := a.sandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			req.Env = env.Map()
			cc, err := sb.CreateContext(cmd.Context(), req)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), cc)
			}
			fmt.Fprintln(cmd.OutOrStdout(), cc.ID)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&req.Language, "lang", "l", "", "language: python (default), javascript or bash")
	fs.StringVarP(&req.Cwd, "cwd", "w", "", "working directory, absolute (default: the user's home)")
	fs.StringVarP(&req.User, "user", "u", "", "user name or uid to run as (default: the template's user)")
	fs.VarP(env, "env", "e", "environment variable for the interpreter (repeatable)")
	fs.BoolVar(&asJSON, "json", false, "print the context as JSON")
	return cmd
}

func newContextLsCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "ls ID",
		Aliases: []string{"list"},
		Short:   "List a sandbox's code contexts",
		Args:    argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			sb, err := a.sandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			list, err := sb.ListContexts(cmd.Context())
			if err != nil {
				return err
			}
			if list == nil {
				list = []api.CodeContext{}
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), api.CodeContextList{Contexts: list})
			}
			now := time.Now()
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 3, ' ', 0)
			fmt.Fprintln(tw, "ID\tLANGUAGE\tPID\tRUNS\tUSER\tCWD\tCREATED")
			for _, c := range list {
				pid := "-"
				if c.PID != 0 {
					pid = fmt.Sprint(c.PID)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", c.ID, c.Language, pid, c.ExecutionCount, c.User, c.Cwd, ago(c.CreatedAt, now))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newContextRestartCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "restart ID CONTEXT",
		Short: "Give a code context a fresh interpreter (its state is lost)",
		Args:  argsUsage(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			sb, err := a.sandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			_, err = sb.RestartContext(cmd.Context(), args[1])
			return err
		},
	}
}

func newContextRmCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "rm ID CONTEXT...",
		Aliases: []string{"delete"},
		Short:   "Delete code contexts, killing their interpreters",
		Args:    argsUsage(cobra.MinimumNArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			sb, err := a.sandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			var failed error
			for _, id := range args[1:] {
				if err := sb.DeleteContext(cmd.Context(), id); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "airlock: %s: %v\n", id, err)
					failed = exitCode(1)
				}
			}
			return failed
		},
	}
}
