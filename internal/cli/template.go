package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/airlockdev/airlock/api"
)

func newTemplateCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "template",
		Aliases: []string{"templates"},
		Short:   "Build and list sandbox templates",
		Args:    argsUsage(cobra.NoArgs),
	}
	cmd.AddCommand(newTemplateBuildCmd(a), newTemplateLsCmd(a))
	return cmd
}

func newTemplateBuildCmd(a *app) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "build NAME",
		Short: "Build a template (progress on stderr, the name on stdout)",
		Args:  argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			tpl, err := c.BuildTemplate(cmd.Context(), args[0], force, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), tpl.Name)
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "rebuild even if the template is already built")
	return cmd
}

func newTemplateLsCmd(a *app) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List built templates",
		Args:    argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			tpls, err := c.Templates(cmd.Context())
			if err != nil {
				return err
			}
			if tpls == nil {
				tpls = []api.Template{}
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), api.TemplateList{Templates: tpls})
			}
			now := time.Now()
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 3, ' ', 0)
			fmt.Fprintln(tw, "NAME\tBUILDER\tSIZE\tBUILT")
			for _, t := range tpls {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Builder, humanMB(t.SizeBytes), ago(t.BuiltAt, now))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
