package template

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFingerprint(t *testing.T) {
	opts, err := BuildOptions{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	base := recipe{builder: "debootstrap", version: 2, packages: []string{"bash", "python3"}, shell: "/bin/bash"}
	ref := fingerprint(base, opts)
	same := []struct {
		name string
		r    recipe
		o    BuildOptions
	}{
		{"identical", base, opts},
		{"package order", recipe{builder: "debootstrap", version: 2, packages: []string{"python3", "bash"}, shell: "/bin/bash"}, opts},
		{"extra already in the list", base, withExtra(opts, "bash")},
		{"mirror", base, BuildOptions{Mirror: "http://mirror.example/debian", Suite: opts.Suite, AgentUID: opts.AgentUID}},
	}
	for _, tt := range same {
		if got := fingerprint(tt.r, tt.o); got != ref {
			t.Errorf("%s: fingerprint %s, want %s", tt.name, got, ref)
		}
	}
	differ := []struct {
		name string
		r    recipe
		o    BuildOptions
	}{
		{"version", recipe{builder: "debootstrap", version: 3, packages: base.packages, shell: "/bin/bash"}, opts},
		{"package added", recipe{builder: "debootstrap", version: 2, packages: []string{"bash", "python3", "nodejs"}, shell: "/bin/bash"}, opts},
		{"extra package", base, withExtra(opts, "jq")},
		{"suite", base, BuildOptions{Mirror: opts.Mirror, Suite: "trixie", AgentUID: opts.AgentUID}},
		{"uid", base, BuildOptions{Mirror: opts.Mirror, Suite: opts.Suite, AgentUID: 1001}},
		{"shell", recipe{builder: "debootstrap", version: 2, packages: base.packages, shell: "/bin/sh"}, opts},
	}
	for _, tt := range differ {
		if got := fingerprint(tt.r, tt.o); got == ref {
			t.Errorf("%s: fingerprint unchanged (%s)", tt.name, got)
		}
	}
	if !strings.HasPrefix(ref, "v2-") {
		t.Errorf("fingerprint %s does not start with the version", ref)
	}
}

func withExtra(o BuildOptions, pkgs ...string) BuildOptions {
	o.ExtraPackages = pkgs
	return o
}

func TestUsesLower(t *testing.T) {
	const dir = "/var/lib/airlock/templates/base/rootfs"
	tests := []struct {
		line string
		want bool
	}{
		{"51 27 0:47 / /data/sb/rootfs rw,nodev - overlay overlay rw,lowerdir=" + dir + ",upperdir=/u,workdir=/w", true},
		{"51 27 0:47 / /data/sb/rootfs rw - overlay overlay rw,lowerdir=/a:" + dir + ",upperdir=/u,workdir=/w", true},
		{"51 27 0:47 / /data/sb/rootfs rw - overlay overlay rw,lowerdir=" + dir + "2,upperdir=/u,workdir=/w", false},
		{"51 27 0:47 / /data/sb/rootfs rw - overlay overlay rw,upperdir=" + dir + ",workdir=/w", false},
		{"22 1 8:1 / " + dir + " rw - ext4 /dev/sda1 rw,lowerdir=" + dir, false},
		{"garbage", false},
	}
	for _, tt := range tests {
		if got := usesLower(tt.line, dir); got != tt.want {
			t.Errorf("usesLower(%q) = %v, want %v", tt.line, got, tt.want)
		}
	}
}

// TestRebuildOnRecipeChange: a cached template built from another recipe
// (or before fingerprints were recorded) is rebuilt once, then cached.
func TestRebuildOnRecipeChange(t *testing.T) {
	requireBusybox(t)
	ctx := context.Background()
	s := NewStore(t.TempDir())
	first, err := s.Build(ctx, "busybox", BuildOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.Recipe == "" || !s.UpToDate("busybox") {
		t.Fatalf("fresh build: recipe %q, up to date %v", first.Recipe, s.UpToDate("busybox"))
	}
	for _, recorded := range []string{"v0-0123456789abcdef", ""} {
		setRecipe(t, s, "busybox", recorded)
		if s.UpToDate("busybox") {
			t.Errorf("recipe %q: still up to date", recorded)
		}
		time.Sleep(5 * time.Millisecond)
		var progress bytes.Buffer
		rebuilt, err := s.Build(ctx, "busybox", BuildOptions{}, &progress)
		if err != nil {
			t.Fatal(err)
		}
		if !rebuilt.BuiltAt.After(first.BuiltAt) || rebuilt.Recipe != first.Recipe {
			t.Errorf("recipe %q: not rebuilt: %+v", recorded, rebuilt)
		}
		if !strings.Contains(progress.String(), "recipe changed") {
			t.Errorf("progress does not say why it rebuilt:\n%s", progress.String())
		}
		again, err := s.Build(ctx, "busybox", BuildOptions{}, nil)
		if err != nil || !again.BuiltAt.Equal(rebuilt.BuiltAt) || !s.UpToDate("busybox") {
			t.Errorf("recipe %q: rebuilt template not cached: %v %+v", recorded, err, again)
		}
		first = rebuilt
	}
	assertNoTemp(t, s.Dir())
}

func setRecipe(t *testing.T, s *Store, name, recipe string) {
	t.Helper()
	p := filepath.Join(s.Dir(), name, metaFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if recipe == "" {
		delete(m, "recipe")
	} else {
		m["recipe"] = recipe
	}
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
