package oci

import (
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

// commandLine returns the program and arguments that run the runtime with
// args. A networked gVisor sandbox gets --network=sandbox (overriding the
// global --network=none): runsc's netstack takes over the interfaces of the
// namespace the daemon prepared.
func (d *Driver) commandLine(logPath string, networked bool, args []string) (string, []string) {
	argv := d.globalFlags(logPath)
	if networked && d.cfg.Flavour == GVisor {
		argv = append(argv, "--network=sandbox")
	}
	return d.cfg.Binary, append(argv, args...)
}
