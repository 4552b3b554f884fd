package oci

import (
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/airlockdev/airlock/internal/sandbox"
)

// withNetwork makes a networked sandbox join the network namespace the
// daemon prepared (with its veth and address) instead of a fresh empty
// one, and bind-mounts the files the network needs (resolv.conf, CA
// bundle) read-only. Without a network the spec is unchanged.
func withNetwork(s *specs.Spec, n *sandbox.NetworkAttachment) *specs.Spec {
	if n == nil {
		return s
	}
	for i, ns := range s.Linux.Namespaces {
		if ns.Type == specs.NetworkNamespace {
			s.Linux.Namespaces[i].Path = n.NetNSPath
		}
	}
	for _, m := range n.Mounts {
		s.Mounts = append(s.Mounts, specs.Mount{
			Destination: m.Destination, Type: "bind", Source: m.Source,
			Options: []string{"rbind", "ro", "nosuid", "nodev", "noexec"},
		})
	}
	return s
}

// gvisorNetMask hides /proc/sys/net from runsc while it starts a networked
// sandbox. runsc 20221219 refuses to take over a namespace's interfaces if
// /proc/sys/net/core/rmem_default exists, which it took as proof of being
// in the host's namespace; kernels since 6.x show that file in every
// namespace. The mask lives in a private mount namespace that only the
// starting runsc sees; the sandbox and gofer pivot into their own roots and
// keep none of it.
//
// The masked /proc is no longer "fully visible", and the kernel lets a
// user namespace (runsc's sandbox, which mounts proc for the KVM platform)
// mount proc only if some proc mount is; so an unmasked proc is mounted
// first at $1, in the same private namespace.
const gvisorNetMask = `mkdir -p "$1" && mount -t proc proc "$1" && ` +
	`mount -t tmpfs -o ro,nosuid,nodev,noexec airlock-mask /proc/sys/net && shift && exec "$0" "$@"`

// commandLine returns the program and arguments that run the runtime with
// args. Starting a networked gVisor sandbox uses runsc's netstack on the
// prepared namespace (--network=sandbox, which overrides the global
// --network=none) under the mask above.
func (d *Driver) commandLine(logPath string, networked bool, args []string) (string, []string) {
	argv := d.globalFlags(logPath)
	if !networked || d.cfg.Flavour != GVisor {
		return d.cfg.Binary, append(argv, args...)
	}
	argv = append(argv, "--network=sandbox")
	argv = append(argv, args...)
	visible := filepath.Join(d.cfg.Dir, "proc-visible")
	return "unshare", append([]string{"--mount", "--propagation", "private", "--", "sh", "-c", gvisorNetMask, d.cfg.Binary, visible}, argv...)
}
