package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/airlockdev/airlock/api"
)

// TestPosture inspects every process of a sandbox from the host, for each
// runtime, the way an auditor would: privileges, seccomp, capabilities,
// namespaces, open descriptors and mounts.
func TestPosture(t *testing.T) {
	d := startDaemon(t, "")
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt})
			ctx := testCtx(t, time.Minute)
			// A process of the default user that outlives its exec, so the
			// sandbox has agent, shim and user processes to inspect.
			if _, err := sb.Exec(ctx, api.ExecRequest{Shell: "sleep 300 >/dev/null 2>&1 &"}); err != nil {
				t.Fatal(err)
			}
			var procs []hostProc
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				procs = sandboxProcs(t, sb.ID)
				if rt != api.RuntimeRunc || hasCmd(procs, "sleep 300") || time.Now().After(deadline) {
					break
				}
			}
			if len(procs) == 0 {
				t.Fatalf("no processes in the pids cgroup of %s", sb.ID)
			}
			if rt == api.RuntimeRunc {
				checkRuncPosture(t, procs)
			} else {
				checkGVisorPosture(t, procs)
			}
		})
	}
}

func hasCmd(procs []hostProc, cmd string) bool {
	for _, p := range procs {
		if p.cmd == cmd {
			return true
		}
	}
	return false
}

// hostProc is one host process of a sandbox, as /proc shows it.
type hostProc struct {
	pid    int
	cmd    string
	status map[string]string
}

func (p hostProc) String() string { return fmt.Sprintf("pid %d (%s)", p.pid, p.cmd) }

// caps parses a Cap* line of status.
func (p hostProc) caps(name string) uint64 {
	v, _ := strconv.ParseUint(p.status[name], 16, 64)
	return v
}

func (p hostProc) uid() string { return strings.Fields(p.status["Uid"] + " ?")[0] }

// ns returns the process's namespace link, e.g. "pid:[4026531836]".
func (p hostProc) ns(kind string) string {
	l, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", p.pid, kind))
	return l
}

// sandboxProcs lists the host processes in the sandbox's pids cgroup.
func sandboxProcs(t *testing.T, id string) []hostProc {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/pids/airlock", id, "cgroup.procs"))
	if err != nil {
		b, err = os.ReadFile(filepath.Join("/sys/fs/cgroup/airlock", id, "cgroup.procs"))
	}
	if err != nil {
		t.Fatalf("sandbox cgroup: %v", err)
	}
	var out []hostProc
	for _, f := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(f)
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue // exited meanwhile
		}
		p := hostProc{pid: pid, status: map[string]string{}}
		for _, line := range strings.Split(string(st), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				p.status[k] = strings.TrimSpace(v)
			}
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		p.cmd = strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))
		if p.cmd == "" {
			p.cmd = p.status["Name"]
		}
		out = append(out, p)
	}
	return out
}

// hostNS is the test process's own namespace of each kind.
func hostNS(kind string) string {
	l, _ := os.Readlink("/proc/self/ns/" + kind)
	return l
}

// agentCaps is the capability set of the agent: the OCI spec's list.
const agentCaps = 1<<0 | 1<<1 | 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 // CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID SETPCAP NET_BIND_SERVICE

func checkRuncPosture(t *testing.T, procs []hostProc) {
	sawUser := false
	for _, p := range procs {
		if p.status["NoNewPrivs"] != "1" {
			t.Errorf("%v: NoNewPrivs %q, want 1", p, p.status["NoNewPrivs"])
		}
		if p.status["Seccomp"] != "2" {
			t.Errorf("%v: Seccomp %q, want 2 (filter)", p, p.status["Seccomp"])
		}
		for _, kind := range []string{"pid", "mnt", "ipc", "uts", "net"} {
			if p.ns(kind) == hostNS(kind) {
				t.Errorf("%v: shares the host's %s namespace", p, kind)
			}
		}
		switch p.uid() {
		case "0": // the agent and exec shims
			for _, c := range []string{"CapEff", "CapPrm"} {
				if p.caps(c) != agentCaps {
					t.Errorf("%v: %s %x, want %x", p, c, p.caps(c), uint64(agentCaps))
				}
			}
			// A shim has already emptied its bounding set for its command.
			if bnd := p.caps("CapBnd"); bnd&^agentCaps != 0 || p.caps("CapAmb") != 0 {
				t.Errorf("%v: CapBnd %x CapAmb %x, want within %x and none", p, bnd, p.caps("CapAmb"), uint64(agentCaps))
			}
		default: // the default user's processes
			sawUser = true
			for _, c := range []string{"CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb"} {
				if p.caps(c) != 0 {
					t.Errorf("%v (uid %s): %s %x, want 0", p, p.uid(), c, p.caps(c))
				}
			}
			checkOnlyStdio(t, p)
		}
		checkNoDirFDs(t, p)
		if p.cmd == "/.airlock/airlock-agent --dial unix:/.airlock/run/agent.sock" {
			checkRuncMounts(t, p)
		}
	}
	if !sawUser {
		t.Errorf("no process of the default user among %v", procs)
	}
}

// checkOnlyStdio asserts a command has exactly descriptors 0, 1 and 2.
func checkOnlyStdio(t *testing.T, p hostProc) {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.pid))
	if err != nil {
		t.Errorf("%v: %v", p, err)
		return
	}
	var fds []string
	for _, e := range ents {
		fds = append(fds, e.Name())
	}
	if strings.Join(fds, " ") != "0 1 2" {
		t.Errorf("%v: open descriptors %v, want only 0 1 2", p, fds)
	}
}

// checkNoDirFDs asserts no descriptor of p is a directory: an open host
// directory is the leaked-fd escape (CVE-2024-21626).
func checkNoDirFDs(t *testing.T, p hostProc) {
	t.Helper()
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.pid))
	for _, e := range ents {
		fd := fmt.Sprintf("/proc/%d/fd/%s", p.pid, e.Name())
		if fi, err := os.Stat(fd); err == nil && fi.IsDir() {
			target, _ := os.Readlink(fd)
			t.Errorf("%v: descriptor %s is a directory (%s)", p, e.Name(), target)
		}
	}
}

// runcMounts are the mount points a runc sandbox may have: its root, the
// kernel filesystems, Airlock's two bind mounts, and the masked and
// read-only paths of the spec.
var runcMounts = map[string]bool{
	"/": true, "/proc": true, "/dev": true, "/dev/pts": true, "/dev/shm": true,
	"/dev/mqueue": true, "/sys": true,
	"/.airlock/airlock-agent": true, "/.airlock/run": true,
	"/proc/bus": true, "/proc/fs": true, "/proc/irq": true, "/proc/sys": true,
	"/proc/acpi": true, "/proc/asound": true, "/proc/interrupts": true, "/proc/kcore": true,
	"/proc/keys": true, "/proc/latency_stats": true, "/proc/sched_debug": true,
	"/proc/scsi": true, "/proc/timer_list": true, "/proc/timer_stats": true,
	"/proc/sysrq-trigger": true, "/proc/kallsyms": true, "/proc/kmsg": true,
	"/proc/config.gz": true, "/sys/firmware": true, "/sys/devices/virtual/powercap": true,
	"/sys/kernel/debug": true, "/sys/kernel/security": true,
}

// checkRuncMounts reads the agent's mount table: only the expected mount
// points, the host directories bound in only where Airlock puts them,
// the agent binary read-only, and nosuid,nodev on the root.
func checkRuncMounts(t *testing.T, p hostProc) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", p.pid))
	if err != nil {
		t.Errorf("%v: %v", p, err)
		return
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		// id parent major:minor root mountpoint options ... - fstype source superoptions
		f := strings.Fields(line)
		pre, post, _ := strings.Cut(line, " - ")
		_ = pre
		pf := strings.Fields(post)
		if len(f) < 6 || len(pf) < 1 {
			continue
		}
		root, mp, opts, fstype := f[3], f[4], ","+f[5]+",", pf[0]
		if !runcMounts[mp] && !strings.HasPrefix(mp, "/etc/") {
			t.Errorf("%v: unexpected mount %s (%s %s)", p, mp, fstype, root)
		}
		switch mp {
		case "/":
			if fstype != "overlay" || !strings.Contains(opts, ",nosuid,") || !strings.Contains(opts, ",nodev,") {
				t.Errorf("%v: root is %s %s, want overlay nosuid,nodev", p, fstype, opts)
			}
		case "/.airlock/airlock-agent":
			if !strings.Contains(opts, ",ro,") {
				t.Errorf("%v: agent binary mounted %s, want read-only", p, opts)
			}
		}
		// A bind of a host directory: only Airlock's two mounts (and the
		// network's /etc files) may be one.
		hostBind := strings.HasPrefix(root, "/") && root != "/" && fstype != "proc" && fstype != "tmpfs" &&
			fstype != "sysfs" && fstype != "devpts" && fstype != "mqueue"
		if hostBind && !strings.HasPrefix(mp, "/.airlock/") && !strings.HasPrefix(mp, "/etc/") {
			t.Errorf("%v: host path %s mounted at %s", p, root, mp)
		}
	}
}

// goferCaps bounds the gofer, the one runsc process with capabilities in
// the host's user namespace: CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER
// FSETID SYS_CHROOT, to serve the sandbox's files from its chroot, and,
// with --host-uds=open, SETGID SETUID: current runsc connects a host socket
// with the calling sandbox user's euid/egid (its seccomp filter allows
// only setreuid/setregid for that).
const goferCaps = 1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<4 | 1<<6 | 1<<7 | 1<<18

func checkGVisorPosture(t *testing.T, procs []hostProc) {
	var sentry, gofer int
	for _, p := range procs {
		if p.status["NoNewPrivs"] != "1" {
			t.Errorf("%v: NoNewPrivs %q, want 1", p, p.status["NoNewPrivs"])
		}
		if p.status["Seccomp"] != "2" {
			t.Errorf("%v: Seccomp %q, want 2 (runsc's own filter)", p, p.status["Seccomp"])
		}
		for _, kind := range []string{"mnt", "ipc", "uts", "net"} {
			if p.ns(kind) == hostNS(kind) {
				t.Errorf("%v: shares the host's %s namespace", p, kind)
			}
		}
		checkNoDirFDsExcept(t, p, strings.HasPrefix(p.cmd, "runsc-gofer"))
		switch {
		case strings.HasPrefix(p.cmd, "runsc-gofer"):
			gofer++
			if p.caps("CapEff")&^goferCaps != 0 || p.caps("CapBnd")&^goferCaps != 0 {
				t.Errorf("%v: gofer capabilities eff %x bnd %x exceed %x", p, p.caps("CapEff"), p.caps("CapBnd"), uint64(goferCaps))
			}
			if p.ns("pid") == hostNS("pid") {
				t.Errorf("%v: gofer shares the host's pid namespace", p)
			}
		default:
			// The sentry and its stub processes (ptrace platform) run as
			// nobody in a user namespace of their own, so whatever
			// capabilities they hold do not apply to the host.
			sentry++
			if p.uid() != "65534" {
				t.Errorf("%v: uid %s, want 65534 (nobody)", p, p.uid())
			}
			if p.ns("user") == hostNS("user") {
				t.Errorf("%v: sentry shares the host's user namespace", p)
			}
			checkGVisorSentryRoot(t, p)
		}
	}
	if sentry == 0 || gofer != 1 {
		t.Errorf("want one gofer and the sentry, got %d gofers, %d sentry processes", gofer, sentry)
	}
}

func checkNoDirFDsExcept(t *testing.T, p hostProc, isGofer bool) {
	t.Helper()
	if isGofer {
		return // the gofer serves the sandbox's root: its open directories are that root's
	}
	checkNoDirFDs(t, p)
}

// checkGVisorSentryRoot asserts the sentry sees no host filesystem at all:
// its root is an empty read-only tmpfs runsc builds, with nothing mounted.
func checkGVisorSentryRoot(t *testing.T, p hostProc) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", p.pid))
	if err != nil {
		t.Errorf("%v: %v", p, err)
		return
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[4] != "/" && f[4] != "/proc" {
			t.Errorf("%v: sentry has %s mounted", p, f[4])
		}
	}
}
