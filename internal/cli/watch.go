package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/airlockdev/airlock/api"
)

func newWatchCmd(a *app) *cobra.Command {
	var recursive, asJSON bool
	cmd := &cobra.Command{
		Use:   "watch [-r] [--json] ID PATH",
		Short: "Print changes in a sandbox directory as they happen",
		Long: "Watch a directory in a sandbox and print one line per change (create, write,\n" +
			"remove, rename) until interrupted. With -r, directories below PATH are watched\n" +
			"too, including new ones. 'overflow' means events were lost. The command fails\n" +
			"when the directory is removed.",
		Example: "  airlock watch sb-123 /home/user\n" +
			"  airlock watch -r --json sb-123 /home/user/project | jq .path",
		Args: argsUsage(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			sb, err := a.sandbox(ctx, args[0])
			if err != nil {
				return err
			}
			w, err := sb.Watch(ctx, args[1], recursive)
			if err != nil {
				return err
			}
			defer w.Close()
			out := cmd.OutOrStdout()
			enc := json.NewEncoder(out)
			for {
				ev, err := w.Next()
				if err != nil {
					return err
				}
				if asJSON {
					err = enc.Encode(ev)
				} else {
					_, err = fmt.Fprintln(out, formatFileEvent(ev))
				}
				if err != nil {
					return err
				}
			}
		},
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "watch subdirectories too")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print events as JSON lines")
	return cmd
}

// formatFileEvent renders an event as "15:04:05.000 create /path/dir/".
func formatFileEvent(ev api.FileEvent) string {
	p := ev.Path
	if ev.NewPath != "" {
		p += " -> " + ev.NewPath
	}
	if ev.IsDir {
		p += "/"
	}
	return fmt.Sprintf("%s %-8s %s", ev.Time.Local().Format("15:04:05.000"), ev.Type, p)
}
