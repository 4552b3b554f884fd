package template

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
)

// fingerprint identifies what a build of recipe r with opts produces: the
// recipe's version, its builder, suite and uid, and its package list. It
// is recorded in template.json; a cached template whose fingerprint
// differs is rebuilt, so a changed recipe reaches existing installs
// without anyone deleting their cache.
func fingerprint(r recipe, opts BuildOptions) string {
	pkgs := slices.Clone(r.packages)
	if r.builder == "debootstrap" {
		pkgs = append(pkgs, opts.ExtraPackages...)
	}
	slices.Sort(pkgs)
	pkgs = slices.Compact(pkgs)
	h := sha256.New()
	fmt.Fprintf(h, "version %d\nbuilder %s\nshell %s\nuid %d\n", r.version, r.builder, r.shell, opts.AgentUID)
	if r.builder == "debootstrap" {
		fmt.Fprintf(h, "suite %s\n", opts.Suite)
	}
	fmt.Fprintf(h, "packages %s\n", strings.Join(pkgs, " "))
	return "v" + fmt.Sprint(r.version) + "-" + hex.EncodeToString(h.Sum(nil))[:16]
}

// mountedLower reports whether an overlay mount of this process's mount
// namespace uses dir as a lower layer: a running sandbox's root. Replacing
// or removing a template must leave such a tree in place, or the sandbox
// loses files under its feet. Mount options show the path given at mount
// time, which a renamed tree keeps.
func mountedLower(dir string) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if usesLower(sc.Text(), dir) {
			return true
		}
	}
	return false
}

// usesLower reports whether a mountinfo line is an overlay with dir among
// its lowerdir layers.
func usesLower(line, dir string) bool {
	_, rest, ok := strings.Cut(line, " - ")
	if !ok {
		return false
	}
	f := strings.Fields(rest)
	if len(f) < 3 || f[0] != "overlay" {
		return false
	}
	for _, opt := range strings.Split(f[2], ",") {
		if layers, ok := strings.CutPrefix(opt, "lowerdir="); ok {
			if slices.Contains(strings.Split(layers, ":"), dir) {
				return true
			}
		}
	}
	return false
}
