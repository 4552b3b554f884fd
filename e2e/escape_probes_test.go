package e2e

// The escape suite's table. Verdicts are errno names (ENOENT, EPERM, ...),
// ALLOWED, or a probe's own word. "seccomp" below means Airlock's profile
// (internal/driver/oci/seccomp.go), which runc installs in the kernel and
// runsc enforces with --oci-seccomp.

const root = "root"

func escapeProbes() []escapeProbe {
	eperm := []string{"EPERM"}
	return []escapeProbe{
		// Host files.
		{name: "read a host file by its host path", py: `try_(lambda: open(E["HOST_MARKER"]).read())`,
			stop: "file not found: the host path is not mounted in the sandbox", want: []string{"ENOENT"}},
		{name: "read a host file through /proc/1/root", user: root, py: `try_(lambda: open("/proc/1/root" + E["HOST_MARKER"]).read())`,
			stop: "permission denied: the agent holds capabilities an exec lacks, so its /proc entries are closed to it", want: []string{"EACCES", "ENOENT"}},
		{name: "list /proc/1/root as the default user", py: `try_(lambda: os.listdir("/proc/1/root"))`,
			stop: "permission denied: PID 1 belongs to root", want: []string{"EACCES"}, gvisor: []string{"EACCES", "EINVAL"}},
		{name: "walk out of the root with ..", py: `try_(lambda: open("/../../../.." + E["HOST_MARKER"]).read())`,
			stop: "file not found: .. at the root stays at the root", want: []string{"ENOENT"}},
		{name: "read another sandbox's file through /proc/*/root", user: root,
			py:   `print("FOUND" if glob.glob("/proc/*/root/tmp/nb-secret") else "NOTFOUND")`,
			stop: "separate pid namespaces: the neighbour's processes are not visible", want: []string{"NOTFOUND"}},
		{name: "read another sandbox's file by its host path", user: root, py: `try_(lambda: open(E["NB_ROOT_FILE"]).read())`,
			stop: "file not found: host paths are not mounted", want: []string{"ENOENT"}},
		{name: "hard link /etc/shadow to read it", py: `try_(lambda: os.link("/etc/shadow", "/tmp/shadow-link"))`,
			stop: "EPERM: protected hard links (not the owner, cannot read it)", want: eperm},

		// Kernel interfaces.
		{name: "write /proc/sysrq-trigger", user: root, py: `
p = "/proc/sysrq-trigger"
try:
    f = open(p, "w", buffering=1); st = os.fstat(f.fileno())
    if stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3):
        print("MASKED")
    else:
        f.write("h\n")  # sysrq help: on a host it only logs, which the test looks for
        print("WRITTEN")
except OSError as e:
    print(en(e.errno))`,
			stop: "masked (bound to /dev/null) or absent; under gVisor (runsc ignores maskedPaths) the file is the sentry's own static procfs file, whose writes fail with EIO, and the host's kernel log is checked for no new sysrq line",
			want: []string{"MASKED", "ENOENT"}, gvisor: []string{"EIO", "MASKED", "ENOENT", "EACCES", "EPERM"}},
		{name: "write /proc/sys (vm.overcommit_memory)", user: root, py: `try_(lambda: open("/proc/sys/vm/overcommit_memory", "w").write("2"))`,
			stop: "read-only /proc/sys mount; under gVisor the write lands in the sandbox's own kernel (the host's value is checked unchanged)",
			want: []string{"EROFS"}, gvisor: []string{"ALLOWED", "EROFS", "EACCES"}},
		{name: "write /sys", user: root, py: `try_(lambda: open("/sys/kernel/mm/transparent_hugepage/enabled", "w").write("never"))`,
			stop: "read-only sysfs", want: []string{"EROFS"}, gvisor: []string{"EROFS", "ENOENT", "EACCES"}},
		{name: "mount a tmpfs", user: root, py: `
r = libc.mount(b"none", b"/mnt", b"tmpfs", 0, None)
print("ALLOWED" if r == 0 else en(ctypes.get_errno()))`, stop: "seccomp (mount is not allowed)", want: eperm},
		{name: "mount cgroup v1 for its release_agent (CVE-2022-0492)", user: root, py: `
r = libc.mount(b"cgroup", b"/mnt", b"cgroup", 0, b"rdma")
print("ALLOWED" if r == 0 else en(ctypes.get_errno()))`, stop: "seccomp (mount is not allowed)", want: eperm},
		{name: "write a cgroup release_agent", user: root, py: `
ra = glob.glob("/sys/fs/cgroup/*/release_agent") + glob.glob("/sys/fs/cgroup/release_agent")
if not ra: print("NONE")
else: try_(lambda: open(ra[0], "w").write("/tmp/pwn"))`,
			stop: "no cgroup filesystem in the sandbox", want: []string{"NONE", "EROFS"}},
		{name: "load a kernel module (init_module)", user: root, py: `sys_(175, 0, 0, 0)`, stop: "seccomp", want: eperm},
		{name: "load a kernel module (finit_module)", user: root, py: `sys_(313, 0, 0, 0)`, stop: "seccomp", want: eperm},
		{name: "unload a kernel module", user: root, py: `sys_(176, 0, 0)`, stop: "seccomp", want: eperm},
		{name: "kexec_load", user: root, py: `sys_(246, 0, 0, 0, 0)`, stop: "seccomp", want: eperm},
		{name: "mknod a block device", user: root, py: `try_(lambda: os.mknod("/tmp/sda", 0o600 | stat.S_IFBLK, os.makedev(8, 0)))`,
			stop: "no CAP_MKNOD", want: eperm},
		{name: "mknod /dev/mem", user: root, py: `try_(lambda: os.mknod("/tmp/mem", 0o600 | stat.S_IFCHR, os.makedev(1, 1)))`,
			stop: "no CAP_MKNOD", want: eperm},
		{name: "open the host's disk", user: root, py: `try_(lambda: open("/dev/vda", "rb"))`,
			stop: "not in the sandbox's /dev (and the device cgroup denies it)", want: []string{"ENOENT"}},
		{name: "chroot", user: root, py: `try_(lambda: os.chroot("/tmp"))`, stop: "seccomp, no CAP_SYS_CHROOT", want: eperm},
		{name: "pivot_root", user: root, py: `sys_(155, 0, 0)`, stop: "seccomp", want: eperm},

		// Processes outside the sandbox.
		{name: "ptrace a host process", user: root, py: `sys_(101, 16, int(E["HOST_PID"]), 0, 0)`, stop: "seccomp (ptrace denied)", want: eperm},
		{name: "signal a host process", user: root, py: `try_(lambda: os.kill(int(E["HOST_PID"]), 0))`,
			stop: "no such process: separate pid namespace", want: []string{"ESRCH"}},
		{name: "ptrace the agent", user: root, py: `sys_(101, 16, 1, 0, 0)`, stop: "seccomp (ptrace denied)", want: eperm},

		// Runtime escapes.
		{name: "setuid-root binary (no_new_privs)", setup: "cp /usr/bin/id /tmp/suid-id && chmod 4755 /tmp/suid-id",
			shell: "/tmp/suid-id -u", stop: "no_new_privs and a nosuid root: the euid stays 1000", want: []string{"1000"}},
		{name: "open /proc/self/exe for writing (CVE-2019-5736)", py: `try_(lambda: open("/proc/self/exe", "r+b"))`,
			stop: "permission denied (no runtime binary is ever reachable: runc re-executes from a sealed copy, runsc is outside)", want: []string{"EACCES", "ETXTBSY"}},
		{name: "open the agent binary for writing", user: root, py: `try_(lambda: open("/.airlock/airlock-agent", "r+b"))`,
			stop: "read-only bind mount of a running binary", want: []string{"EROFS", "ETXTBSY"}, gvisor: []string{"EROFS", "ETXTBSY", "EACCES"}},
		{name: "replace the agent binary's mode", user: root, py: `try_(lambda: os.chmod("/.airlock/airlock-agent", 0o777))`,
			stop: "read-only bind mount", want: []string{"EROFS"}, gvisor: []string{"EROFS", "EPERM", "EACCES"}},
		{name: "open /proc/1/exe for writing", user: root, py: `try_(lambda: open("/proc/1/exe", "r+b"))`,
			stop: "the agent is not ptrace-accessible (more capabilities than an exec)", want: []string{"EACCES", "EROFS", "ETXTBSY"}},
		{name: "leaked directory descriptors (CVE-2024-21626)", user: root, py: `
leaks = []
for f in glob.glob("/proc/[0-9]*/fd/*") + glob.glob("/proc/[0-9]*/cwd"):
    try:
        st = os.stat(f)
        if not stat.S_ISDIR(st.st_mode): continue
        p = os.readlink(f); st2 = os.stat(p)
        if (st2.st_dev, st2.st_ino) != (st.st_dev, st.st_ino): leaks.append(f + " -> " + p)
    except OSError:
        pass
print("LEAK " + " ".join(leaks) if leaks else "NONE")`,
			stop: "no descriptor of a host directory in any sandbox process", want: []string{"NONE"}},
		{name: "write the agent's socket directory", py: `try_(lambda: open("/.airlock/run/x", "w"))`,
			stop: "permission denied: /.airlock/run is root's, mode 0700", want: []string{"EACCES"}, gvisor: []string{"EACCES", "EINVAL"}},
		{name: "connect to the agent socket to impersonate the agent", py: `
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try_(lambda: s.connect("/.airlock/run/agent.sock"))`,
			stop: "permission denied on the directory", want: []string{"EACCES"}},

		// Kernel attack surface.
		{name: "keyctl", py: `sys_(250, 0, -3, 0)`, stop: "seccomp", want: eperm},
		{name: "add_key", py: `sys_(248, 0, 0, 0, 0, -3)`, stop: "seccomp", want: eperm},
		{name: "request_key", py: `sys_(249, 0, 0, 0, 0)`, stop: "seccomp", want: eperm},
		{name: "bpf", user: root, py: `sys_(321, 5, 0, 0)`, stop: "seccomp", want: eperm},
		{name: "io_uring_setup", py: `sys_(425, 1, 0)`, stop: "seccomp", want: eperm},
		{name: "userfaultfd", py: `sys_(323, 0)`, stop: "seccomp", want: eperm},
		{name: "perf_event_open", py: `sys_(298, 0, 0, -1, -1, 0)`, stop: "seccomp", want: eperm},
		{name: "unshare a user namespace (unshare -U)", py: `sys_(272, 0x10000000)`, stop: "seccomp", want: eperm},
		{name: "unshare a network namespace (unshare -n)", user: root, py: `sys_(272, 0x40000000)`, stop: "seccomp", want: eperm},
		{name: "clone into a new user namespace", py: `sys_(56, 0x10000000 | 17, 0, 0, 0, 0)`, stop: "seccomp (clone namespace flags)", want: eperm},
		{name: "setns", user: root, py: `sys_(308, 0, 0)`, stop: "seccomp", want: eperm},
		{name: "AF_VSOCK socket", py: `try_(lambda: socket.socket(40, socket.SOCK_STREAM, 0))`, stop: "seccomp (socket family)", want: eperm},
		{name: "AF_ALG socket", py: `try_(lambda: socket.socket(38, socket.SOCK_SEQPACKET, 0))`, stop: "seccomp (socket family)", want: eperm},

		// Network.
		{name: "raw socket", user: root, py: `try_(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))`,
			stop: "no CAP_NET_RAW (gVisor: raw sockets off)", want: eperm},
		{name: "packet socket", user: root, py: `try_(lambda: socket.socket(17, socket.SOCK_RAW, 0))`, stop: "seccomp (socket family)", want: eperm},
		{name: "reach a host loopback listener", py: `connect("127.0.0.1", E["HOST_PORT"])`,
			stop: "connection refused: the sandbox's loopback is its own (network none)", want: []string{"ECONNREFUSED"}},
		{name: "reach the host's address", py: `connect(E["HOST_IP"], E["HOST_IP_PORT"])`,
			stop: "unreachable: network none", want: []string{"ENETUNREACH", "EHOSTUNREACH"}},
		{name: "reach the cloud metadata address", py: `connect("169.254.169.254", 80)`,
			stop: "unreachable: network none", want: []string{"ENETUNREACH", "EHOSTUNREACH"}},
		{name: "reach another sandbox's listener", py: `connect("127.0.0.1", E["NB_PORT"])`,
			stop: "connection refused: each sandbox has its own network namespace", want: []string{"ECONNREFUSED"}},
	}
}
