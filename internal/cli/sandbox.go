package cli

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlockdev/airlock/api"
)

func newCreateCmd(a *app) *cobra.Command {
	var (
		rt       runtimeFlag
		template string
		timeout  durationFlag
		env      = newKVFlag()
		labels   = newKVFlag()
		cpus     float64
		memory   int64
		disk     int64
		pids     int64
		net      netFlags
	)
	cmd := &cobra.Command{
		Use:   "create [flags]",
		Short: "Create a sandbox and print its id",
		Example: "  id=$(airlock create --label task=demo --timeout 30m)\n" +
			"  airlock create --runtime runc --cpus 2 --memory 2048 --env API_URL=http://example",
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			sb, err := c.CreateSandbox(cmd.Context(), api.CreateSandboxRequest{
				Template:       template,
				Runtime:        rt.v,
				CPUs:           cpus,
				MemoryMB:       memory,
				DiskMB:         disk,
				PidsLimit:      pids,
				TimeoutSeconds: ceilSeconds(timeout.d),
				Env:            env.Map(),
				Labels:         labels.Map(),
				Network:        net.policy(),
				Secrets:        net.secrets,
			})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), sb.ID)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.Var(&rt, "runtime", "sandbox runtime: gvisor or runc (default: the daemon's)")
	fs.StringVar(&template, "template", "", "template to start from (default: base)")
	fs.Var(&timeout, "timeout", "delete the sandbox after this long, e.g. 30m or seconds (default: the daemon's, 15m)")
	fs.VarP(env, "env", "e", "environment variable for every command in the sandbox (repeatable)")
	fs.VarP(labels, "label", "l", "label to find the sandbox by (repeatable)")
	fs.Float64Var(&cpus, "cpus", 0, "CPU limit, e.g. 0.5 or 2 (default: the daemon's, 1)")
	fs.Int64Var(&memory, "memory", 0, "memory limit in MB (default: the daemon's, 512)")
	fs.Int64Var(&disk, "disk", 0, "disk limit in MB (default: the daemon's, 2048)")
	fs.Int64Var(&pids, "pids", 0, "maximum number of processes (default: the daemon's, 1024)")
	net.register(fs)
	return cmd
}

func newLsCmd(a *app) *cobra.Command {
	var (
		asJSON bool
		labels = newKVFlag()
	)
	cmd := &cobra.Command{
		Use:     "ls [flags]",
		Aliases: []string{"list"},
		Short:   "List sandboxes",
		Args:    argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.ListSandboxes(cmd.Context(), labels.Map())
			if err != nil {
				return err
			}
			if list == nil {
				list = []api.Sandbox{}
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), api.SandboxList{Sandboxes: list})
			}
			now := time.Now()
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 3, ' ', 0)
			fmt.Fprintln(tw, "ID\tTEMPLATE\tRUNTIME\tSTATE\tCREATED\tEXPIRES\tLABELS")
			for _, sb := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", sb.ID, sb.Template, sb.Runtime, sb.State,
					ago(sb.CreatedAt, now), expiresIn(sb.ExpiresAt, now), formatLabels(sb.Labels))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().VarP(labels, "label", "l", "only sandboxes with this label (repeatable)")
	return cmd
}

func newInspectCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "inspect ID",
		Short: "Print a sandbox's details as JSON",
		Args:  argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			sb, err := a.sandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), sb.Sandbox)
		},
	}
}

func newRmCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "rm ID [ID...]",
		Aliases: []string{"delete"},
		Short:   "Delete sandboxes (deleting a missing one is not an error)",
		Args:    argsUsage(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var failed []error
			for _, id := range args {
				if err := c.DeleteSandbox(cmd.Context(), id); err != nil {
					if len(args) == 1 {
						return err
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "airlock: %s: %v\n", id, err)
					failed = append(failed, err)
				}
			}
			if len(failed) > 0 {
				return exitCode(1) // each failure is already reported
			}
			return nil
		},
	}
}

func newTimeoutCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "timeout ID DURATION",
		Short:   "Make a sandbox expire DURATION from now",
		Example: "  airlock timeout sb-123 1h\n  airlock timeout sb-123 600",
		Args:    argsUsage(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := parseDuration(args[1])
			if err != nil {
				return usageError{err}
			}
			if d < time.Second {
				return usageError{errors.New("timeout must be at least 1s")}
			}
			sb, err := a.sandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return sb.SetTimeout(cmd.Context(), d)
		},
	}
}
