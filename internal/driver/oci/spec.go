package oci

import (
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/airlockdev/airlock/internal/sandbox"
)

// Paths inside the sandbox that Airlock owns.
const (
	agentPath  = "/.airlock/airlock-agent"
	runDir     = "/.airlock/run"
	socketName = "agent.sock"
)

// capabilities of the agent (PID 1, uid 0 inside the sandbox). Processes it
// starts as the default non-root user lose all of them on setuid; processes
// run as root get at most these. Docker's default set minus MKNOD, NET_RAW,
// SETFCAP, SYS_CHROOT and AUDIT_WRITE. CAP_SETPCAP stays for the agent
// alone: its exec shim uses it to empty the bounding set of every process
// it starts as a non-root user, and drops it from the bounding set of
// processes run as root (internal/agent/shim.go).
var capabilities = []string{
	"CAP_SETPCAP",
	"CAP_CHOWN",
	"CAP_DAC_OVERRIDE",
	"CAP_FOWNER",
	"CAP_FSETID",
	"CAP_KILL",
	"CAP_SETGID",
	"CAP_SETUID",
	"CAP_NET_BIND_SERVICE",
}

// Docker's masked paths plus a few more kernel interfaces a sandbox has no
// use for.
var maskedPaths = []string{
	"/proc/acpi",
	"/proc/asound",
	"/proc/interrupts",
	"/proc/kcore",
	"/proc/keys",
	"/proc/latency_stats",
	"/proc/sched_debug",
	"/proc/scsi",
	"/proc/timer_list",
	"/proc/timer_stats",
	"/proc/sysrq-trigger",
	"/proc/kallsyms",
	"/proc/kmsg",
	"/proc/config.gz",
	"/sys/firmware",
	"/sys/devices/virtual/powercap",
	"/sys/kernel/debug",
	"/sys/kernel/security",
}

var readonlyPaths = []string{
	"/proc/bus",
	"/proc/fs",
	"/proc/irq",
	"/proc/sys",
}

// devices a sandbox may use; everything else is denied by the device cgroup.
var allowedDevices = []specs.LinuxDeviceCgroup{
	{Allow: false, Access: "rwm"},
	chardev(1, 3),    // null
	chardev(1, 5),    // zero
	chardev(1, 7),    // full
	chardev(1, 8),    // random
	chardev(1, 9),    // urandom
	chardev(5, 0),    // tty
	chardev(5, 2),    // ptmx
	chardev(136, -1), // pts/*
}

func chardev(major, minor int64) specs.LinuxDeviceCgroup {
	d := specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: &major, Access: "rwm"}
	if minor >= 0 {
		d.Minor = &minor
	}
	return d
}

// bundleSpec builds the OCI runtime spec of a sandbox.
func bundleSpec(spec sandbox.Spec, rootfs, hostRunDir, hostAgent string) *specs.Spec {
	noexecOpts := []string{"nosuid", "noexec", "nodev"}
	memBytes := spec.MemoryMB << 20
	swap := memBytes // memory+swap equal to memory: no swap
	period := uint64(100000)
	quota := int64(spec.CPUs * float64(period))
	shares := uint64(1024 * spec.CPUs)
	pids := spec.PidsLimit
	oomAdj := 500 // sandboxes die before the daemon does
	nofile := nofileLimit()

	return &specs.Spec{
		Version:  specs.Version,
		Hostname: "sandbox",
		Root:     &specs.Root{Path: rootfs},
		Process: &specs.Process{
			Args: []string{agentPath, "--dial", "unix:" + runDir + "/" + socketName},
			Env:  []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			Cwd:  "/",
			User: specs.User{UID: 0, GID: 0},
			Capabilities: &specs.LinuxCapabilities{
				Bounding:  capabilities,
				Effective: capabilities,
				Permitted: capabilities,
			},
			Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_NOFILE", Hard: nofile, Soft: nofile},
			},
			NoNewPrivileges: true,
			OOMScoreAdj:     &oomAdj,
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: noexecOpts},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
			{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: noexecOpts},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: append([]string{"ro"}, noexecOpts...)},
			{Destination: agentPath, Type: "bind", Source: hostAgent, Options: []string{"rbind", "ro", "nosuid", "nodev"}},
			{Destination: runDir, Type: "bind", Source: hostRunDir, Options: []string{"rbind", "rw", "nosuid", "nodev", "noexec"}},
		},
		Linux: &specs.Linux{
			CgroupsPath: "/airlock/" + spec.ID,
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace},
				{Type: specs.NetworkNamespace},
				{Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace},
				{Type: specs.MountNamespace},
			},
			Resources: &specs.LinuxResources{
				Devices: allowedDevices,
				Memory:  &specs.LinuxMemory{Limit: &memBytes, Swap: &swap},
				CPU:     &specs.LinuxCPU{Shares: &shares, Quota: &quota, Period: &period},
				Pids:    &specs.LinuxPids{Limit: &pids},
			},
			MaskedPaths:   maskedPaths,
			ReadonlyPaths: readonlyPaths,
		},
	}
}

// nofileLimit is the open-files limit for sandboxes: 65536, or the daemon's
// own hard limit if lower, since runc applies rlimits after dropping
// CAP_SYS_RESOURCE and cannot raise them.
func nofileLimit() uint64 {
	const want = 65536
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err == nil && rl.Max < want {
		return rl.Max
	}
	return want
}
