package oci

import (
	"strconv"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// The seccomp profile of every sandbox: an allowlist with the semantics of
// Docker's default profile for a container without CAP_SYS_ADMIN (default
// action EPERM, x86_64 with its x86 and x32 sub-architectures), made
// stricter:
//
//   - io_uring_setup/enter/register are denied (Docker allows them): io_uring
//     has been the source of a long run of kernel privilege escalations.
//   - ptrace, process_vm_readv and process_vm_writev are denied (Docker allows
//     them on kernels >= 4.8). Inside a pid namespace they only reach the
//     sandbox's own processes, but ptrace is a large, bug-prone kernel
//     surface (CVE-2019-13272) that untrusted code does not need; debuggers
//     work under gVisor, which implements ptrace in its own kernel.
//   - socket is allowed only for AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK
//     (Docker denies only AF_VSOCK): AF_VSOCK, AF_ALG, AF_PACKET and every
//     rarely used family with its own kernel code are refused. socketcall,
//     the 32-bit multiplexer that would bypass that filter, is denied.
//   - clone with any CLONE_NEW* flag and unshare are denied, so no process
//     can create a user namespace (and the root-in-userns kernel surface
//     that comes with it); clone3 fails with ENOSYS under runc (see
//     clone3Rule for gVisor), since its flags live in
//     memory seccomp cannot inspect, so libc falls back to clone.
//   - keyctl, add_key, request_key, userfaultfd, bpf, perf_event_open,
//     kexec_*, module loading, mount, umount2, pivot_root and the new mount
//     API (fsopen, fsmount, move_mount, open_tree, ...) are not in the
//     allowlist, so they fail with EPERM; Docker allows several of them when
//     a container holds CAP_SYS_ADMIN, which no sandbox does.
//
// runc installs the filter on the agent (PID 1), so every process in the
// sandbox inherits it. runsc gets the same profile with --oci-seccomp and
// enforces it in its own kernel, on top of the filter it always installs on
// the sentry and the gofer.
func seccompProfile(flavour string) *specs.LinuxSeccomp {
	eperm := uint(unix.EPERM)
	s := &specs.LinuxSeccomp{
		DefaultAction:   specs.ActErrno,
		DefaultErrnoRet: &eperm,
		Architectures:   []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32},
		Syscalls: []specs.LinuxSyscall{
			{Names: allowedSyscalls, Action: specs.ActAllow},
			{Names: []string{"arch_prctl", "modify_ldt"}, Action: specs.ActAllow},
			clone3Rule(flavour),
			{
				// Only a clone with none of the namespace flags set.
				Names:  []string{"clone"},
				Action: specs.ActAllow,
				Args:   []specs.LinuxSeccompArg{{Index: 0, Value: cloneNamespaceFlags, ValueTwo: 0, Op: specs.OpMaskedEqual}},
			},
		},
	}
	// Rules with one condition each are ORed, so each allowed value is its
	// own rule. (runc turns several conditions on the same argument into
	// separate rules too, so "!= A and != B" cannot be expressed.)
	for _, family := range []uint64{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK} {
		s.Syscalls = append(s.Syscalls, specs.LinuxSyscall{
			Names: []string{"socket"}, Action: specs.ActAllow,
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: family, Op: specs.OpEqualTo}},
		})
	}
	// personality: only the values Docker allows (query, PER_LINUX,
	// PER_LINUX32 and their UNAME26 variants); ADDR_NO_RANDOMIZE and friends
	// are refused.
	for _, p := range []uint64{0x0, 0x8, 0x20000, 0x20008, 0xffffffff} {
		s.Syscalls = append(s.Syscalls, specs.LinuxSyscall{
			Names: []string{"personality"}, Action: specs.ActAllow,
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: p, Op: specs.OpEqualTo}},
		})
	}
	return s
}

// clone3Rule makes clone3 fail with ENOSYS under runc. runsc ignores a
// rule's own errno (every errno rule answers EPERM, and glibc only falls
// back to clone on ENOSYS, so no thread could start), so under gVisor
// clone3 is let through to gVisor's kernel, which implements it: there
// its namespace flags can only create namespaces inside the sentry, never
// on the host.
func clone3Rule(flavour string) specs.LinuxSyscall {
	if flavour == GVisor {
		return specs.LinuxSyscall{Names: []string{"clone3"}, Action: specs.ActAllow}
	}
	enosys := uint(unix.ENOSYS)
	return specs.LinuxSyscall{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys}
}

// harden adds the seccomp profile to a sandbox's spec, and moves the pids
// limit inside gVisor.
func (d *Driver) harden(s *specs.Spec) *specs.Spec {
	s.Linux.Seccomp = seccompProfile(d.cfg.Flavour)
	if d.cfg.Flavour == GVisor && s.Linux.Resources != nil && s.Linux.Resources.Pids != nil {
		gvisorPids(s)
	}
	return s
}

// gvisorPids enforces a gVisor sandbox's pids limit in its own kernel:
// when the sentry cannot create a host thread or stub process it dies,
// taking the sandbox with it, so a fork bomb must be stopped before the
// host's pids cgroup is reached. The agent gives every exec the limit as
// RLIMIT_NPROC, which gVisor enforces per user of the sandbox (threads
// included) with EAGAIN, like Linux; the host cgroup keeps a generous
// multiple (each application process costs the sentry a stub process
// and threads) as the backstop against the sentry itself.
func gvisorPids(s *specs.Spec) {
	if s.Linux.Resources.Pids.Limit == nil {
		return
	}
	limit := *s.Linux.Resources.Pids.Limit
	host := limit*gvisorPidsPerTask + gvisorPidsBase
	s.Linux.Resources.Pids.Limit = &host
	s.Process.Args = append(s.Process.Args, "--nproc", strconv.FormatInt(limit, 10))
}

// Host tasks per sandbox task and for the sentry and gofer themselves.
// Measured on runsc 20221219 (ptrace platform): about 6 host pids per
// single-threaded application process, growing as stub processes gain
// threads; a fast fork bomb overshoots any such multiple (the sentry
// creates stubs faster than RLIMIT_NPROC refuses forks) and is stopped
// by the host cgroup, which takes the sandbox down.
const (
	gvisorPidsPerTask = 10
	gvisorPidsBase    = 512
)

// cloneNamespaceFlags is every CLONE_NEW* flag: clone(2) with any of them is
// refused. The value is Docker's mask.
const cloneNamespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// allowedSyscalls are allowed with any arguments. Names unknown to the
// host's libseccomp (newer syscalls) are skipped by runc.
var allowedSyscalls = []string{
	// files and directories
	"access", "chdir", "chmod", "chown", "chown32", "close", "close_range",
	"copy_file_range", "creat", "dup", "dup2", "dup3", "faccessat",
	"faccessat2", "fadvise64", "fadvise64_64", "fallocate", "fchdir",
	"fchmod", "fchmodat", "fchown", "fchown32", "fchownat", "fcntl",
	"fcntl64", "fdatasync", "flock", "fstat", "fstat64", "fstatat64",
	"fstatfs", "fstatfs64", "fsync", "ftruncate", "ftruncate64",
	"futimesat", "getcwd", "getdents", "getdents64", "lchown", "lchown32",
	"link", "linkat", "_llseek", "lseek", "lstat", "lstat64", "mkdir",
	"mkdirat", "mknod", "mknodat", "name_to_handle_at", "newfstatat",
	"open", "openat", "openat2", "pread64", "preadv", "preadv2",
	"pwrite64", "pwritev", "pwritev2", "read", "readahead", "readlink",
	"readlinkat", "readv", "rename", "renameat", "renameat2", "rmdir",
	"sendfile", "sendfile64", "splice", "stat", "stat64", "statfs",
	"statfs64", "statx", "symlink", "symlinkat", "sync", "sync_file_range",
	"syncfs", "tee", "truncate", "truncate64", "umask", "unlink", "unlinkat",
	"utime", "utimensat", "utimensat_time64", "utimes", "vmsplice", "write",
	"writev",
	// extended attributes
	"fgetxattr", "flistxattr", "fremovexattr", "fsetxattr", "getxattr",
	"lgetxattr", "listxattr", "llistxattr", "lremovexattr", "lsetxattr",
	"removexattr", "setxattr",
	// polling, events, notification
	"epoll_create", "epoll_create1", "epoll_ctl", "epoll_ctl_old",
	"epoll_pwait", "epoll_pwait2", "epoll_wait", "epoll_wait_old", "eventfd",
	"eventfd2", "fanotify_mark", "inotify_add_watch", "inotify_init",
	"inotify_init1", "inotify_rm_watch", "_newselect", "pause", "pipe",
	"pipe2", "poll", "ppoll", "ppoll_time64", "pselect6", "pselect6_time64",
	"select", "signalfd", "signalfd4", "timerfd_create", "timerfd_gettime",
	"timerfd_gettime64", "timerfd_settime", "timerfd_settime64",
	// asynchronous I/O (the old io_* API; io_uring is denied)
	"io_cancel", "io_destroy", "io_getevents", "io_pgetevents",
	"io_pgetevents_time64", "io_setup", "io_submit", "ioctl", "ioprio_get",
	"ioprio_set",
	// memory
	"brk", "madvise", "membarrier", "memfd_create", "memfd_secret", "mincore",
	"mlock", "mlock2", "mlockall", "mmap", "mmap2", "mprotect", "mremap",
	"msync", "munlock", "munlockall", "munmap", "pkey_alloc", "pkey_free",
	"pkey_mprotect", "remap_file_pages",
	// processes, threads, credentials
	"capget", "capset", "execve", "execveat", "exit", "exit_group", "fork",
	"getegid", "getegid32", "geteuid", "geteuid32", "getgid", "getgid32",
	"getgroups", "getgroups32", "getpgid", "getpgrp", "getpid", "getppid",
	"getpriority", "getresgid", "getresgid32", "getresuid", "getresuid32",
	"getrlimit", "get_robust_list", "getrusage", "getsid", "get_thread_area",
	"gettid", "getuid", "getuid32", "kill", "pidfd_open", "pidfd_send_signal",
	"prctl", "prlimit64", "process_mrelease", "restart_syscall", "rseq",
	"seccomp", "setfsgid", "setfsgid32", "setfsuid", "setfsuid32", "setgid",
	"setgid32", "setgroups", "setgroups32", "setpgid", "setpriority",
	"setregid", "setregid32", "setresgid", "setresgid32", "setresuid",
	"setresuid32", "setreuid", "setreuid32", "setrlimit", "set_robust_list",
	"setsid", "set_thread_area", "set_tid_address", "setuid", "setuid32",
	"tgkill", "tkill", "ugetrlimit", "vfork", "wait4", "waitid", "waitpid",
	"landlock_add_rule", "landlock_create_ruleset", "landlock_restrict_self",
	// signals
	"rt_sigaction", "rt_sigpending", "rt_sigprocmask", "rt_sigqueueinfo",
	"rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait",
	"rt_sigtimedwait_time64", "rt_tgsigqueueinfo", "sigaltstack",
	"sigprocmask", "sigreturn",
	// scheduling
	"getcpu", "sched_getaffinity", "sched_getattr", "sched_getparam",
	"sched_get_priority_max", "sched_get_priority_min", "sched_getscheduler",
	"sched_rr_get_interval", "sched_rr_get_interval_time64",
	"sched_setaffinity", "sched_setattr", "sched_setparam",
	"sched_setscheduler", "sched_yield",
	// time
	"adjtimex", "alarm", "clock_adjtime", "clock_adjtime64", "clock_getres",
	"clock_getres_time64", "clock_gettime", "clock_gettime64",
	"clock_nanosleep", "clock_nanosleep_time64", "getitimer", "gettimeofday",
	"nanosleep", "setitimer", "time", "timer_create", "timer_delete",
	"timer_getoverrun", "timer_gettime", "timer_gettime64", "timer_settime",
	"timer_settime64", "times",
	// futexes
	"futex", "futex_time64", "futex_waitv",
	// System V and POSIX IPC (private to the sandbox's ipc namespace)
	"ipc", "mq_getsetattr", "mq_notify", "mq_open", "mq_timedreceive",
	"mq_timedreceive_time64", "mq_timedsend", "mq_timedsend_time64",
	"mq_unlink", "msgctl", "msgget", "msgrcv", "msgsnd", "semctl", "semget",
	"semop", "semtimedop", "semtimedop_time64", "shmat", "shmctl", "shmdt",
	"shmget",
	// sockets (socket itself is filtered by family)
	"accept", "accept4", "bind", "connect", "getpeername", "getsockname",
	"getsockopt", "listen", "recv", "recvfrom", "recvmmsg",
	"recvmmsg_time64", "recvmsg", "send", "sendmmsg", "sendmsg", "sendto",
	"setsockopt", "shutdown", "socketpair",
	// system information
	"getrandom", "sysinfo", "uname",
}

// gvisorHardeningFlags are runsc flags beyond its defaults. --oci-seccomp
// makes gVisor's kernel enforce the bundle's seccomp profile (the one runc
// gets) on the sandbox's processes, so both runtimes refuse the same
// syscalls the same way. --directfs=false keeps the gofer mediating every
// file access: with directfs (runsc's default since 2023) the sentry opens
// rootfs files itself, so it holds host directory descriptors and runs as
// root in the host user namespace; without it the sentry runs as nobody in
// its own user namespace, in an empty chroot, with no host file open. That
// costs a gofer round trip per file open, which the e2e suite tolerates.
// runsc's defaults that matter and are kept: raw sockets off (no
// --net-raw), no host cgroupfs in the sandbox (no --cgroupfs).
// The kvm platform is not used: on this host it runs the workload but the
// sandbox never finishes starting or exiting (checked by lead: `runsc
// --platform=kvm run` of echo prints and then hangs), which hangs every
// create; ptrace stays.
var gvisorHardeningFlags = []string{"--oci-seccomp", "--directfs=false"}
