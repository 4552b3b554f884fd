package template

import (
	"context"
	"errors"
	"fmt"
	"github.com/airlockdev/airlock/internal/reaper"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// basePackages are installed on top of debootstrap's minbase variant:
// the tools agents reach for, and what data work and code contexts need
// (numpy, pandas and matplotlib for Python, Node.js for JavaScript).
var basePackages = []string{
	"bash", "coreutils", "findutils", "procps", "less",
	"ca-certificates", "curl", "git", "python3",
	"iproute2", "xz-utils",
	"python3-numpy", "python3-pandas", "python3-matplotlib", "nodejs",
}

// Recipe versions. Bump one when its recipe changes in a way its package
// list does not show (finalize steps, slimming): cached templates are
// rebuilt when their fingerprint (see fingerprint.go) no longer matches.
const (
	baseRecipeVersion    = 2
	busyboxRecipeVersion = 1
)

type recipe struct {
	builder  string
	version  int
	packages []string // what the builder installs, for the fingerprint
	shell    string   // login shell of the agent user
	build    func(ctx context.Context, b *buildEnv) (packages []string, err error)
}

var recipes = map[string]recipe{
	"base": {builder: "debootstrap", version: baseRecipeVersion, packages: basePackages,
		shell: "/bin/bash", build: buildDebootstrap},
	"busybox": {builder: "busybox", version: busyboxRecipeVersion, shell: "/bin/sh", build: buildBusybox},
}

type buildEnv struct {
	rootfs   string
	cacheDir string // <dir>/.cache
	opts     BuildOptions
	out      *lineWriter
}

var debPkgRE = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)

func buildDebootstrap(ctx context.Context, b *buildEnv) ([]string, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("debootstrap requires root")
	}
	bin, err := exec.LookPath("debootstrap")
	if err != nil {
		return nil, fmt.Errorf("debootstrap not installed: %w", err)
	}
	pkgs := append([]string(nil), basePackages...)
	seen := map[string]bool{}
	for _, p := range pkgs {
		seen[p] = true
	}
	for _, p := range b.opts.ExtraPackages {
		if !debPkgRE.MatchString(p) {
			return nil, fmt.Errorf("invalid package name %q", p)
		}
		if !seen[p] {
			seen[p] = true
			pkgs = append(pkgs, p)
		}
	}
	cache := filepath.Join(b.cacheDir, "debootstrap")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}

	cmd := exec.CommandContext(ctx, bin,
		"--variant=minbase",
		"--include="+strings.Join(pkgs, ","),
		"--cache-dir="+cache,
		b.opts.Suite, b.rootfs, b.opts.Mirror)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive")
	// debootstrap forks wget, dpkg and chroots; kill the whole group on
	// cancel so nothing keeps writing into the dir we are about to delete.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	w := b.out.withHook(newPhaseTracker())
	cmd.Stdout, cmd.Stderr = w, w

	b.out.Printf("resolving packages (%s from %s)", b.opts.Suite, b.opts.Mirror)
	err = reaper.Run(cmd)
	w.Flush()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		logTail(b.out, filepath.Join(b.rootfs, "debootstrap", "debootstrap.log"), 15)
		return nil, fmt.Errorf("debootstrap: %w (last output: %s)", err, strings.Join(w.Tail(), " | "))
	}
	b.out.Printf("cleaning apt caches and docs")
	if err := cleanApt(b.rootfs); err != nil {
		return nil, fmt.Errorf("clean apt caches: %w", err)
	}
	if err := slimDocs(b.rootfs); err != nil {
		return nil, fmt.Errorf("remove docs: %w", err)
	}
	return pkgs, nil
}

// dpkgExcludes keeps later "apt-get install"s inside a sandbox as slim as
// the template itself, the way the debian:*-slim images do.
const dpkgExcludes = `# Written by airlock to keep sandbox templates small.
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
path-exclude /usr/share/lintian/*
`

// slimDocs drops documentation, man pages and message translations (~70 MB
// on bookworm); minbase has no man or info reader and sandboxes run in the
// C locale. Copyright files stay.
func slimDocs(rootfs string) error {
	cfg := filepath.Join(rootfs, "etc/dpkg/dpkg.cfg.d")
	if err := os.MkdirAll(cfg, 0o755); err != nil {
		return err
	}
	if err := rewriteFile(filepath.Join(cfg, "airlock-slim"), []byte(dpkgExcludes), 0o644); err != nil {
		return err
	}
	keep := map[string]bool{"copyright": true, "locale.alias": true}
	for _, g := range []string{"usr/share/doc/*/*", "usr/share/man/*", "usr/share/info/*", "usr/share/locale/*", "usr/share/lintian/*"} {
		matches, err := filepath.Glob(filepath.Join(rootfs, g))
		if err != nil {
			return err
		}
		for _, m := range matches {
			if keep[filepath.Base(m)] {
				continue
			}
			if err := os.RemoveAll(m); err != nil {
				return err
			}
		}
	}
	return nil
}

// newPhaseTracker maps debootstrap's "I: ..." lines to coarse phases and
// reports each phase once; debootstrap alternates unpack/configure
// rounds, so phases only move forward.
func newPhaseTracker() func(string) string {
	order := []string{"resolving", "downloading", "extracting", "installing", "configuring"}
	cur := 0
	return func(line string) string {
		p := debootstrapPhase(line)
		for i, name := range order {
			if name == p && i > cur {
				cur = i
				return p + " packages"
			}
		}
		return ""
	}
}

func debootstrapPhase(line string) string {
	rest, ok := strings.CutPrefix(line, "I: ")
	if !ok {
		return ""
	}
	word, arg, _ := strings.Cut(strings.TrimSpace(rest), " ")
	switch word {
	case "Retrieving", "Validating":
		switch arg {
		case "InRelease", "Release", "Release.gpg", "Packages":
			return ""
		}
		return "downloading"
	case "Extracting":
		return "extracting"
	case "Installing", "Unpacking":
		return "installing"
	case "Configuring":
		return "configuring"
	}
	return ""
}

func logTail(out *lineWriter, path string, n int) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for _, l := range lines {
		out.Printf("debootstrap.log: %s", l)
	}
}

// cleanApt drops package indexes and downloaded .debs; apt recreates them
// on the next "apt-get update".
func cleanApt(rootfs string) error {
	globs := []string{
		"var/lib/apt/lists/*",
		"var/cache/apt/*.bin",
		"var/cache/apt/archives/*.deb",
		"var/cache/apt/archives/partial/*",
		"var/lib/apt/lists/partial/*",
	}
	for _, g := range globs {
		matches, err := filepath.Glob(filepath.Join(rootfs, g))
		if err != nil {
			return err
		}
		for _, m := range matches {
			base := filepath.Base(m)
			if base == "partial" || base == "lock" {
				continue
			}
			if err := os.RemoveAll(m); err != nil {
				return err
			}
		}
	}
	return nil
}
