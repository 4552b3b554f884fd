package network

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	for _, id := range []string{"sb-abcdefghijkl", "sb-x", "a-very-long-sandbox-identifier"} {
		if n := hostIf(id); len(n) > 15 || !strings.HasPrefix(n, "al-") {
			t.Errorf("hostIf(%q) = %q: must be at most 15 bytes", id, n)
		}
	}
	if got := tableName("sb-abc"); got != "airlock_sb_abc" {
		t.Errorf("tableName = %q", got)
	}
	if p := placeholder(); !strings.HasPrefix(p, "airlock-secret-") || len(p) < 40 || p == placeholder() {
		t.Errorf("placeholder %q is not a fresh random token", p)
	}
}

// TestReadInRoot: a template's CA bundle is read with symlinks resolved
// inside the template, never on the host.
func TestReadInRoot(t *testing.T) {
	root := t.TempDir()
	host := filepath.Join(t.TempDir(), "host-secret")
	os.WriteFile(host, []byte("HOST FILE"), 0o600)
	certs := filepath.Join(root, "etc", "ssl", "certs")
	os.MkdirAll(certs, 0o755)
	os.WriteFile(filepath.Join(root, "bundle.pem"), []byte("IN ROOT"), 0o644)

	if b, err := readInRoot(root, caBundle); err != nil || len(b) != 0 {
		t.Errorf("missing bundle: %q, %v; want empty", b, err)
	}
	os.Symlink("/bundle.pem", filepath.Join(certs, "ca-certificates.crt"))
	if b, err := readInRoot(root, caBundle); err != nil || string(b) != "IN ROOT" {
		t.Errorf("absolute symlink inside the root: %q, %v", b, err)
	}
	os.Remove(filepath.Join(certs, "ca-certificates.crt"))
	os.Symlink(host, filepath.Join(certs, "ca-certificates.crt"))
	if b, _ := readInRoot(root, caBundle); strings.Contains(string(b), "HOST FILE") {
		t.Errorf("a symlink to a host path was followed out of the template")
	}
	os.Remove(filepath.Join(certs, "ca-certificates.crt"))
	os.Symlink("../../../../../../.."+host, filepath.Join(certs, "ca-certificates.crt"))
	if b, _ := readInRoot(root, caBundle); strings.Contains(string(b), "HOST FILE") {
		t.Errorf("a relative symlink escaped the template")
	}
}
