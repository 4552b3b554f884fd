package cli

import (
	"fmt"
	"io"
	"net/netip"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/daemon"
)

// addNetworkFlags registers the daemon's sandbox networking flags.
func addNetworkFlags(cmd *cobra.Command, nc *daemon.NetworkConfig, pool *string) {
	fs := cmd.Flags()
	fs.BoolVar(&nc.Disabled, "no-network", false, "disable sandbox networking: every sandbox gets network mode none")
	fs.StringVar(pool, "network-pool", "10.89.0.0/16", "IPv4 prefix sandbox addresses come from, one /30 per sandbox")
	fs.StringArrayVar(&nc.DNSServers, "dns", nil, "upstream DNS server for sandboxes and the egress proxy, repeatable (default: from /etc/resolv.conf)")
	fs.StringVar(&nc.EgressCAFile, "egress-ca", "", "PEM file of extra root CAs the egress proxy trusts for upstream TLS")
}

func parsePool(s string, nc *daemon.NetworkConfig) error {
	p, err := netip.ParsePrefix(s)
	if err != nil || !p.Addr().Is4() {
		return usagef("--network-pool %q must be an IPv4 prefix such as 10.89.0.0/16", s)
	}
	nc.Pool = p
	return nil
}

// netFlags are the network flags of airlock create.
type netFlags struct {
	mode    string
	allow   []string
	secrets []string
}

func (n *netFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&n.mode, "network", "", "network mode: none, allowlist or open (default: none)")
	fs.StringArrayVar(&n.allow, "allow", nil, "with --network allowlist: a CIDR, domain or *.domain the sandbox may reach (repeatable)")
	fs.StringArrayVar(&n.secrets, "secret", nil, "registered secret the sandbox gets as a placeholder env variable (repeatable)")
}

func (n *netFlags) policy() *api.NetworkPolicy {
	if n.mode == "" && len(n.allow) == 0 {
		return nil
	}
	return &api.NetworkPolicy{Mode: n.mode, Allow: n.allow}
}

func newNetworkCmd(a *app) *cobra.Command {
	var allow []string
	cmd := &cobra.Command{
		Use:   "network ID MODE [--allow X]...",
		Short: "Change a running sandbox's network policy (none, allowlist or open)",
		Example: "  airlock network sb-123 allowlist --allow pypi.org --allow '*.pythonhosted.org'\n" +
			"  airlock network sb-123 none",
		Args: argsUsage(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			sb, err := a.sandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return sb.SetNetworkPolicy(cmd.Context(), api.NetworkPolicy{Mode: args[1], Allow: allow})
		},
	}
	cmd.Flags().StringArrayVar(&allow, "allow", nil, "a CIDR, domain or *.domain the sandbox may reach (repeatable)")
	return cmd
}

func newSecretCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "secret", Short: "Manage secrets brokered to sandboxes"}
	var hosts []string
	set := &cobra.Command{
		Use:     "set NAME --host HOST... < value",
		Short:   "Register or replace a secret; its value is read from standard input",
		Example: "  printf %s \"$GITHUB_TOKEN\" | airlock secret set GITHUB_TOKEN --host api.github.com",
		Args:    argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			b, err := io.ReadAll(io.LimitReader(cmd.InOrStdin(), 64<<10))
			if err != nil {
				return err
			}
			_, err = c.PutSecret(cmd.Context(), api.CreateSecretRequest{Name: args[0], Value: strings.TrimRight(string(b), "\r\n"), Hosts: hosts})
			return err
		},
	}
	set.Flags().StringArrayVar(&hosts, "host", nil, "host (or *.domain) the secret may be sent to (repeatable)")
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List secrets (never their values)",
		Args:  argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			list, err := c.ListSecrets(cmd.Context())
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tHOSTS\tUPDATED")
			for _, s := range list {
				fmt.Fprintf(w, "%s\t%s\t%s\n", s.Name, strings.Join(s.Hosts, ","), s.UpdatedAt.Format(time.RFC3339))
			}
			return w.Flush()
		},
	}
	rm := &cobra.Command{
		Use:   "rm NAME...",
		Short: "Delete secrets",
		Args:  argsUsage(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			for _, n := range args {
				if err := c.DeleteSecret(cmd.Context(), n); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.AddCommand(set, ls, rm)
	return cmd
}
