package netns

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"text/template"

	"github.com/airlockdev/airlock/internal/reaper"
)

// Rule modes. Blocked is a networked sandbox whose policy is now "none":
// its interface stays but nothing passes.
const (
	RulesBlocked   = "blocked"
	RulesAllowlist = "allowlist"
	RulesOpen      = "open"
)

// Rules is everything the firewall of one sandbox depends on.
type Rules struct {
	Table     string // nftables table name, of this sandbox alone
	Link      Link
	Mode      string
	Allowed   []netip.Prefix // allowlist: reachable directly
	Never     []netip.Prefix // dropped whatever the mode
	Private   []netip.Prefix // dropped unless in Allowed
	Pool      netip.Prefix   // other sandboxes
	ProxyPort uint16         // egress proxy, on the host end
	DNSPort   uint16         // DNS forwarder, on the host end
	Redirect  []uint16       // TCP ports sent to the proxy
}

// One table per sandbox: creating or deleting it is one atomic nft
// transaction, and no sandbox's rules can weaken another's, since a drop
// in any base chain is final.
var rulesTmpl = template.Must(template.New("rules").Funcs(template.FuncMap{
	"set": func(ps []netip.Prefix) string {
		s := make([]string, len(ps))
		for i, p := range ps {
			s[i] = p.String()
		}
		return "{ " + strings.Join(s, ", ") + " }"
	},
	"ports": func(ps []uint16) string {
		s := make([]string, len(ps))
		for i, p := range ps {
			s[i] = fmt.Sprint(p)
		}
		return "{ " + strings.Join(s, ", ") + " }"
	},
}).Parse(`table inet {{.Table}}
delete table inet {{.Table}}
table inet {{.Table}} {
	chain prerouting {
		type nat hook prerouting priority dstnat; policy accept;
{{- if ne .Mode "blocked"}}
		iifname "{{.If}}" ip saddr {{.SB}} udp dport 53 dnat ip to {{.GW}}:{{.DNSPort}}
		iifname "{{.If}}" ip saddr {{.SB}} tcp dport 53 dnat ip to {{.GW}}:{{.DNSPort}}
{{- if .Redirect}}
		iifname "{{.If}}" ip saddr {{.SB}} tcp dport {{ports .Redirect}} dnat ip to {{.GW}}:{{.ProxyPort}}
{{- end}}
{{- end}}
	}
	chain input {
		type filter hook input priority filter; policy accept;
		iifname "{{.If}}" ct state established,related accept
{{- if ne .Mode "blocked"}}
		iifname "{{.If}}" ip saddr {{.SB}} ip daddr {{.GW}} ct status dnat udp dport {{.DNSPort}} accept
		iifname "{{.If}}" ip saddr {{.SB}} ip daddr {{.GW}} ct status dnat tcp dport { {{.DNSPort}}, {{.ProxyPort}} } accept
{{- end}}
		iifname "{{.If}}" drop
		ip daddr {{.GW}} iifname != "lo" drop
	}
	chain forward {
		type filter hook forward priority filter; policy accept;
		oifname "{{.If}}" ct state established,related accept
		oifname "{{.If}}" drop
{{- if eq .Mode "blocked"}}
		iifname "{{.If}}" drop
{{- else}}
		iifname "{{.If}}" meta nfproto != ipv4 drop
		iifname "{{.If}}" ip saddr != {{.SB}} drop
		iifname "{{.If}}" ip daddr {{set .Never}} drop
		iifname "{{.If}}" ip daddr {{.Pool}} drop
{{- if .Allowed}}
		iifname "{{.If}}" ip daddr {{set .Allowed}} accept
{{- end}}
{{- if eq .Mode "open"}}
		iifname "{{.If}}" ip daddr {{set .Private}} drop
		iifname "{{.If}}" accept
{{- end}}
		iifname "{{.If}}" drop
{{- end}}
	}
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
{{- if ne .Mode "blocked"}}
		ip saddr {{.SB}} oifname != "{{.If}}" masquerade
{{- end}}
	}
}
`))

// Ruleset renders the nft script that atomically replaces the table.
func (r Rules) Ruleset() (string, error) {
	switch r.Mode {
	case RulesBlocked, RulesAllowlist, RulesOpen:
	default:
		return "", fmt.Errorf("unknown rules mode %q", r.Mode)
	}
	if r.Mode == RulesOpen && len(r.Allowed) > 0 {
		return "", fmt.Errorf("open mode takes no allowed prefixes")
	}
	var b bytes.Buffer
	err := rulesTmpl.Execute(&b, struct {
		Rules
		If, SB, GW string
	}{r, r.Link.HostIf, r.Link.Sandbox.Addr().String(), r.Link.Host.Addr().String()})
	return b.String(), err
}

// Apply installs or replaces the sandbox's table in one transaction.
func Apply(ctx context.Context, r Rules) error {
	script, err := r.Ruleset()
	if err != nil {
		return err
	}
	return nft(ctx, script)
}

// DeleteTable removes a sandbox's table; a missing table is not an error.
func DeleteTable(ctx context.Context, table string) error {
	return nft(ctx, fmt.Sprintf("table inet %s\ndelete table inet %s\n", table, table))
}

// TableExists reports whether the table is installed.
func TableExists(ctx context.Context, table string) bool {
	return reaper.Run(exec.CommandContext(ctx, "nft", "list", "table", "inet", table)) == nil
}

func nft(ctx context.Context, script string) error {
	cmd := exec.CommandContext(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := reaper.CombinedOutput(cmd); err != nil {
		return fmt.Errorf("nft: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// EnableForwarding turns on IPv4 forwarding, which sandboxes' routed
// traffic (open mode, allowlisted CIDRs) needs. The sandbox tables drop
// everything forwarded from a sandbox that its policy does not allow.
func EnableForwarding() error {
	const p = "/proc/sys/net/ipv4/ip_forward"
	if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == "1" {
		return nil
	}
	if err := os.WriteFile(p, []byte("1"), 0o644); err != nil {
		return fmt.Errorf("enable ip forwarding: %w", err)
	}
	return nil
}
