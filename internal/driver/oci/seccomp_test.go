package oci

import (
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// allowedUnconditionally reports whether the profile allows name with no
// argument filter.
func allowedUnconditionally(p *specs.LinuxSeccomp, name string) bool {
	for _, r := range p.Syscalls {
		if r.Action == specs.ActAllow && len(r.Args) == 0 && slices.Contains(r.Names, name) {
			return true
		}
	}
	return false
}

func TestSeccompProfile(t *testing.T) {
	for _, flavour := range []string{Runc, GVisor} {
		p := seccompProfile(flavour)
		if p.DefaultAction != specs.ActErrno || p.DefaultErrnoRet == nil || *p.DefaultErrnoRet != uint(unix.EPERM) {
			t.Errorf("%s: default action %s/%v, want EPERM", flavour, p.DefaultAction, p.DefaultErrnoRet)
		}
		for _, name := range []string{
			"io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd",
			"keyctl", "add_key", "request_key", "bpf", "perf_event_open",
			"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
			"mount", "umount2", "pivot_root", "fsopen", "fsmount", "move_mount", "open_tree",
			"unshare", "setns", "clone", "ptrace", "process_vm_readv", "process_vm_writev",
			"socket", "socketcall", "chroot", "personality", "open_by_handle_at",
		} {
			if allowedUnconditionally(p, name) {
				t.Errorf("%s: %s is allowed without conditions", flavour, name)
			}
		}
		for _, name := range []string{"read", "write", "execve", "fork", "wait4", "openat", "futex", "arch_prctl"} {
			if !allowedUnconditionally(p, name) {
				t.Errorf("%s: %s is not allowed", flavour, name)
			}
		}
		var families []uint64
		var cloneMask uint64
		for _, r := range p.Syscalls {
			switch {
			case slices.Contains(r.Names, "socket"):
				families = append(families, r.Args[0].Value)
			case slices.Contains(r.Names, "clone"):
				if r.Args[0].Op != specs.OpMaskedEqual || r.Args[0].ValueTwo != 0 {
					t.Errorf("%s: clone rule %+v", flavour, r.Args)
				}
				cloneMask = r.Args[0].Value
			}
		}
		if want := []uint64{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}; !slices.Equal(families, want) {
			t.Errorf("%s: socket families %v, want %v", flavour, families, want)
		}
		if cloneMask&unix.CLONE_NEWUSER == 0 || cloneMask&unix.CLONE_NEWNET == 0 || cloneMask&unix.CLONE_NEWNS == 0 {
			t.Errorf("%s: clone mask %#x misses namespace flags", flavour, cloneMask)
		}
	}
	// clone3: ENOSYS from the filter under runc; under gVisor (which ignores
	// a rule's errno) let through to its kernel, which answers ENOSYS.
	for _, r := range seccompProfile(Runc).Syscalls {
		if slices.Contains(r.Names, "clone3") && (r.Action != specs.ActErrno || r.ErrnoRet == nil || *r.ErrnoRet != uint(unix.ENOSYS)) {
			t.Errorf("runc clone3 rule %+v", r)
		}
	}
}

func TestGVisorPids(t *testing.T) {
	limit := int64(100)
	s := &specs.Spec{
		Process: &specs.Process{Args: []string{agentPath}},
		Linux:   &specs.Linux{Resources: &specs.LinuxResources{Pids: &specs.LinuxPids{Limit: &limit}}},
	}
	(&Driver{cfg: Config{Flavour: GVisor}}).harden(s)
	if got := *s.Linux.Resources.Pids.Limit; got != 100*gvisorPidsPerTask+gvisorPidsBase {
		t.Errorf("host pids limit %d", got)
	}
	if !slices.Equal(s.Process.Args, []string{agentPath, "--nproc", "100"}) {
		t.Errorf("agent args %v", s.Process.Args)
	}
	limit2 := int64(100)
	r := &specs.Spec{Process: &specs.Process{}, Linux: &specs.Linux{Resources: &specs.LinuxResources{Pids: &specs.LinuxPids{Limit: &limit2}}}}
	(&Driver{cfg: Config{Flavour: Runc}}).harden(r)
	if *r.Linux.Resources.Pids.Limit != 100 || len(r.Process.Args) != 0 || r.Linux.Seccomp == nil {
		t.Errorf("runc spec changed: pids %d args %v", *r.Linux.Resources.Pids.Limit, r.Process.Args)
	}
}
