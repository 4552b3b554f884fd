package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/airlockdev/airlock/internal/daemon"
	"github.com/airlockdev/airlock/internal/server"
)

// defaultSandboxTTL is how long sandboxes live unless a request says otherwise.
const defaultSandboxTTL = 15 * time.Minute

func newServeCmd() *cobra.Command {
	var (
		cfg     daemon.Config
		rt      runtimeFlag
		timeout = durationFlag{d: defaultSandboxTTL}
		noBuild bool
		pool    string
	)
	cmd := &cobra.Command{
		Use:   "serve [flags]",
		Short: "Run the Airlock daemon",
		Long: "Run the Airlock daemon: the HTTP API on --listen, sandboxes and templates under --data.\n" +
			"On first start it builds the base template (a minute or two; cached afterwards).\n" +
			"Stops on SIGINT or SIGTERM; running sandboxes survive and are re-adopted on restart.",
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout.d <= 0 {
				return usagef("--timeout must be positive")
			}
			server.Version = version()
			cfg.Sandbox.DefaultRuntime = rt.v
			cfg.Sandbox.DefaultTimeout = timeout.d
			if !noBuild {
				cfg.BuildTemplates = []string{"base"}
			}
			cfg.Progress = cmd.ErrOrStderr()
			if err := parsePool(pool, &cfg.Network); err != nil {
				return err
			}
			return daemon.Run(cmd.Context(), cfg)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.Listen, "listen", daemon.DefaultListen, "address to serve the HTTP API on")
	fs.StringVar(&cfg.DataDir, "data", daemon.DefaultDataDir, "directory for templates, sandboxes and state")
	fs.StringVar(&cfg.TemplatesDir, "templates", "", "directory of built templates, may be shared by daemons (default: DATA/templates)")
	fs.Var(&rt, "runtime", "default sandbox runtime: gvisor or runc (default: gvisor if runsc is installed, else runc)")
	fs.Var(&timeout, "timeout", "default sandbox time-to-live, e.g. 15m, 2h, or seconds")
	fs.BoolVar(&noBuild, "no-build", false, "do not build the base template at startup")
	fs.StringVar(&cfg.AgentBinary, "agent", "", "path of the airlock-agent binary (default: beside airlock, then $PATH)")
	addNetworkFlags(cmd, &cfg.Network, &pool)
	return cmd
}
