package netns

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
}

func testRules(mode string) Rules {
	r := Rules{
		Table: "airlock_test_rules",
		Link: Link{HostIf: "al-testrules", Host: netip.MustParsePrefix("10.89.255.249/30"),
			Sandbox: netip.MustParsePrefix("10.89.255.250/30")},
		Mode:      mode,
		Never:     []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("169.254.0.0/16")},
		Private:   []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		Pool:      netip.MustParsePrefix("10.89.0.0/16"),
		ProxyPort: 40001, DNSPort: 40002, Redirect: []uint16{80, 443},
	}
	if mode == RulesAllowlist {
		r.Allowed = []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}
	}
	return r
}

// TestRulesetIsValid renders every mode and has nft check it without
// applying it.
func TestRulesetIsValid(t *testing.T) {
	for _, mode := range []string{RulesBlocked, RulesAllowlist, RulesOpen} {
		t.Run(mode, func(t *testing.T) {
			script, err := testRules(mode).Ruleset()
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{`iifname "al-testrules" drop`, `oifname "al-testrules" drop`} {
				if !strings.Contains(script, want) {
					t.Errorf("ruleset lacks %q:\n%s", want, script)
				}
			}
			if mode == RulesBlocked && strings.Contains(script, "dnat") {
				t.Errorf("blocked ruleset redirects:\n%s", script)
			}
			if _, err := exec.LookPath("nft"); err != nil || os.Geteuid() != 0 {
				t.Skip("nft check needs nft and root")
			}
			cmd := exec.Command("nft", "-c", "-f", "-")
			cmd.Stdin = strings.NewReader(script)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("nft -c: %v: %s\n%s", err, out, script)
			}
		})
	}
	if _, err := (Rules{Mode: "bridge"}).Ruleset(); err == nil {
		t.Error("unknown mode accepted")
	}
}

// TestLifecycle creates a namespace, a veth pair and a table, and checks
// that removing them leaves nothing.
func TestLifecycle(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nsPath := filepath.Join(t.TempDir(), "ns")
	if err := CreateNS(nsPath); err != nil {
		t.Fatal(err)
	}
	defer DeleteNS(nsPath)
	unlock, err := Lock()
	if err != nil {
		t.Fatal(err)
	}
	l, err := Allocate(netip.MustParsePrefix("10.89.0.0/16"))
	if err != nil {
		unlock()
		t.Fatal(err)
	}
	l.HostIf = "al-testlife"
	err = CreateLink(nsPath, l)
	unlock()
	defer DeleteLink(l.HostIf)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("nsenter", "--net="+nsPath, "ip", "-4", "addr", "show", PeerName).CombinedOutput()
	if err != nil || !strings.Contains(string(out), l.Sandbox.String()) {
		t.Errorf("sandbox end: %v: %s", err, out)
	}
	r := testRules(RulesOpen)
	r.Table, r.Link = "airlock_test_life", l
	if err := Apply(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := Apply(ctx, r); err != nil { // replacing is idempotent
		t.Fatal(err)
	}
	if !TableExists(ctx, r.Table) {
		t.Fatal("table missing after apply")
	}
	if err := DeleteTable(ctx, r.Table); err != nil {
		t.Fatal(err)
	}
	if err := DeleteTable(ctx, r.Table); err != nil {
		t.Fatalf("deleting a missing table: %v", err)
	}
	if err := DeleteLink(l.HostIf); err != nil {
		t.Fatal(err)
	}
	if err := DeleteNS(nsPath); err != nil {
		t.Fatal(err)
	}
	if _, err := netlink.LinkByName(l.HostIf); err == nil {
		t.Error("veth left behind")
	}
	if _, err := os.Stat(nsPath); err == nil {
		t.Error("netns file left behind")
	}
}
