// Package oci is the sandbox driver for OCI runtimes: runsc (gVisor) and
// runc. It writes an OCI bundle whose root is an overlay over the template,
// runs the runtime, and gives the daemon connections from the sandbox's
// agent through a unix socket the agent dials.
package oci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/airlockdev/airlock/internal/mountinfo"
	"github.com/airlockdev/airlock/internal/reaper"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/airlockdev/airlock/internal/sandbox"
)

// Runtime flavours.
const (
	GVisor = "gvisor"
	Runc   = "runc"
)

// Config configures one driver instance.
type Config struct {
	Flavour     string   // GVisor or Runc
	Binary      string   // path of runsc or runc
	Dir         string   // driver's own directory: runtime state and sandboxes
	AgentBinary string   // host path of the static airlock-agent
	ExtraFlags  []string // extra global runtime flags, e.g. --platform=kvm
}

// Driver runs sandboxes with one OCI runtime.
type Driver struct {
	cfg Config

	mu        sync.Mutex
	listeners map[string]*net.UnixListener

	// startMu is held for reading by every Start and for writing while
	// runtime-wide state is released once the last sandbox is gone.
	startMu sync.RWMutex
}

var (
	_ sandbox.Driver       = (*Driver)(nil)
	_ sandbox.Sweeper      = (*Driver)(nil)
	_ sandbox.StatusLister = (*Driver)(nil)
)

// New checks that the runtime exists and returns a driver for it.
func New(cfg Config) (*Driver, error) {
	if cfg.Flavour != GVisor && cfg.Flavour != Runc {
		return nil, fmt.Errorf("unknown oci runtime flavour %q", cfg.Flavour)
	}
	bin, err := exec.LookPath(cfg.Binary)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", sandbox.ErrDriverUnavailable, cfg.Binary, err)
	}
	cfg.Binary = bin
	if _, err := os.Stat(cfg.AgentBinary); err != nil {
		return nil, fmt.Errorf("agent binary: %w", err)
	}
	for _, d := range []string{cfg.stateDir(), cfg.sandboxesDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	return &Driver{cfg: cfg, listeners: map[string]*net.UnixListener{}}, nil
}

func (c Config) stateDir() string     { return filepath.Join(c.Dir, "state") }
func (c Config) sandboxesDir() string { return filepath.Join(c.Dir, "sandboxes") }

func containerID(id string) string { return "airlock-" + id }

type layout struct{ dir, bundle, image, disk, upper, work, rootfs, run, socket, log string }

func (d *Driver) layout(id string) layout {
	dir := filepath.Join(d.cfg.sandboxesDir(), id)
	return layout{
		dir:    dir,
		bundle: filepath.Join(dir, "bundle"),
		image:  filepath.Join(dir, "disk.img"),
		disk:   filepath.Join(dir, "disk"),
		upper:  filepath.Join(dir, "disk", "upper"),
		work:   filepath.Join(dir, "disk", "work"),
		rootfs: filepath.Join(dir, "rootfs"),
		run:    filepath.Join(dir, "run"),
		socket: filepath.Join(dir, "run", socketName),
		log:    filepath.Join(dir, "runtime.log"),
	}
}

// Start prepares the bundle and starts the sandbox.
func (d *Driver) Start(ctx context.Context, spec sandbox.Spec) (err error) {
	if spec.TemplatePath == "" {
		return errors.New("oci driver needs a template root filesystem")
	}
	d.startMu.RLock()
	defer d.startMu.RUnlock()
	l := d.layout(spec.ID)
	defer func() {
		if err != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			d.Destroy(cctx, spec.ID)
		}
	}()
	if err := os.MkdirAll(l.bundle, 0o700); err != nil {
		return fmt.Errorf("create bundle dir: %w", err)
	}
	// Root only: an unprivileged process in the sandbox must not reach the
	// agent socket and impersonate the agent.
	if err := os.MkdirAll(l.run, 0o700); err != nil {
		return fmt.Errorf("create run dir: %w", err)
	}
	if spec.DiskMB <= 0 {
		return errors.New("oci driver needs a disk size")
	}
	if err := mountDisk(ctx, l.image, l.disk, spec.DiskMB); err != nil {
		return err
	}
	if err := mountOverlay(spec.TemplatePath, l.upper, l.work, l.rootfs); err != nil {
		return err
	}
	if d.cfg.Flavour == GVisor {
		if err := keepTmpOnRoot(l.rootfs); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(withNetwork(d.harden(bundleSpec(spec, l.rootfs, l.run, d.cfg.AgentBinary)), spec.Network), "", "  ")
	if err != nil {
		return fmt.Errorf("encode bundle spec: %w", err)
	}
	if err := os.WriteFile(filepath.Join(l.bundle, "config.json"), b, 0o600); err != nil {
		return fmt.Errorf("write bundle spec: %w", err)
	}
	// Listen before the agent starts so its first dial succeeds.
	if _, err := d.listener(spec.ID); err != nil {
		return err
	}
	args := []string{"run", "--detach", "--bundle", l.bundle, containerID(spec.ID)}
	if d.cfg.Flavour == Runc {
		args = []string{"run", "-d", "--bundle", l.bundle, containerID(spec.ID)}
	}
	if _, err := d.runNet(ctx, l.log, spec.Network != nil, args...); err != nil {
		return fmt.Errorf("start sandbox: %w", err)
	}
	return nil
}

// globalFlags are passed on every runtime invocation so that every command
// sees the same state root and configuration.
func (d *Driver) globalFlags(logPath string) []string {
	f := []string{"--root", d.cfg.stateDir()}
	if logPath != "" {
		f = append(f, "--log", logPath)
	}
	if d.cfg.Flavour == GVisor {
		// network=none: no network stack at all by default. host-uds=open
		// lets the agent dial the daemon's socket, nothing more.
		f = append(f, "--network=none", "--host-uds=open", "--overlay2=none")
		f = append(f, gvisorHardeningFlags...)
	}
	return append(f, d.cfg.ExtraFlags...)
}

// run invokes the runtime. Its stdio is /dev/null: a detached sandbox
// inherits the runtime's stdio, and a pipe would keep this call waiting.
func (d *Driver) run(ctx context.Context, logPath string, args ...string) ([]byte, error) {
	return d.runNet(ctx, logPath, false, args...)
}

// runNet is run for a command that may start a networked sandbox.
func (d *Driver) runNet(ctx context.Context, logPath string, networked bool, args ...string) ([]byte, error) {
	name, argv := d.commandLine(logPath, networked, args)
	cmd := exec.CommandContext(ctx, name, argv...)
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer devnull.Close()
	out, err := os.CreateTemp("", "airlock-runtime-out-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, out, out
	runErr := reaper.Run(cmd)
	b, _ := os.ReadFile(out.Name())
	if runErr != nil {
		msg := strings.TrimSpace(string(b))
		if logPath != "" {
			msg = strings.TrimSpace(msg + " " + lastLines(logPath, 5))
		}
		return b, fmt.Errorf("%s %s: %w: %s", filepath.Base(d.cfg.Binary), args[0], runErr, msg)
	}
	return b, nil
}

func lastLines(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// listener returns the sandbox's agent listener, creating it if needed (at
// start, or on the first Connect after a daemon restart).
func (d *Driver) listener(id string) (*net.UnixListener, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if l, ok := d.listeners[id]; ok {
		return l, nil
	}
	sock := d.layout(id).socket
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale agent socket: %w", err)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen for agent: %w", err)
	}
	d.listeners[id] = l
	return l, nil
}

// Connect waits for the sandbox's agent to dial in.
func (d *Driver) Connect(ctx context.Context, id string) (net.Conn, error) {
	if _, err := os.Stat(d.layout(id).run); err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", id, err)
	}
	l, err := d.listener(id)
	if err != nil {
		return nil, err
	}
	l.SetDeadline(time.Time{})
	stop := context.AfterFunc(ctx, func() { l.SetDeadline(time.Now()) })
	defer stop()
	conn, err := l.Accept()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("accept agent connection: %w", err)
	}
	return conn, nil
}

type containerState struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

func (d *Driver) list(ctx context.Context) ([]containerState, error) {
	args := []string{"list", "--format", "json"}
	out, err := d.run(ctx, "", args...)
	if err != nil {
		return nil, err
	}
	var states []containerState
	if s := strings.TrimSpace(string(out)); s != "" && s != "null" {
		if err := json.Unmarshal([]byte(s), &states); err != nil {
			return nil, fmt.Errorf("parse %s list: %w", d.cfg.Flavour, err)
		}
	}
	return states, nil
}

// Status reports the container's state.
func (d *Driver) Status(ctx context.Context, id string) (sandbox.Status, error) {
	all, err := d.Statuses(ctx)
	if err != nil {
		return sandbox.StatusMissing, err
	}
	return all[id], nil // StatusMissing is the zero value
}

// Statuses reports the state of every container of this driver.
func (d *Driver) Statuses(ctx context.Context) (map[string]sandbox.Status, error) {
	states, err := d.list(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]sandbox.Status, len(states))
	for _, s := range states {
		id, ok := strings.CutPrefix(s.ID, "airlock-")
		if !ok {
			continue
		}
		out[id] = sandbox.StatusStopped
		if s.Status == "running" {
			out[id] = sandbox.StatusRunning
		}
	}
	return out, nil
}

// Destroy kills the sandbox and removes its container, cgroups, mounts and
// files. It is idempotent.
func (d *Driver) Destroy(ctx context.Context, id string) error {
	d.mu.Lock()
	if l, ok := d.listeners[id]; ok {
		l.Close()
		delete(d.listeners, id)
	}
	d.mu.Unlock()

	var errs []error
	cid := containerID(id)
	// delete --force kills every process of the container first.
	if _, err := d.run(ctx, "", "delete", "--force", cid); err != nil {
		if st, serr := d.Status(ctx, id); serr != nil || st != sandbox.StatusMissing {
			errs = append(errs, err)
		}
	}
	if err := removeCgroups(id); err != nil {
		errs = append(errs, err)
	}
	l := d.layout(id)
	if err := mountinfo.UnmountAll(l.dir); err != nil {
		errs = append(errs, err)
	} else if err := os.RemoveAll(l.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove sandbox dir: %w", err))
	}
	if len(errs) > 0 {
		return fmt.Errorf("destroy %s: %w", id, errors.Join(errs...))
	}
	d.releaseIfIdle()
	return nil
}

// releaseIfIdle unmounts runsc's shared "null" network namespace once no
// sandbox of this driver remains. runsc bind-mounts it into its state root
// for gofers and never removes it; running gofers hold it open, so it is
// only runtime-wide state, re-created by the next start.
func (d *Driver) releaseIfIdle() {
	if d.cfg.Flavour != GVisor {
		return
	}
	d.startMu.Lock()
	defer d.startMu.Unlock()
	if entries, err := os.ReadDir(d.cfg.sandboxesDir()); err != nil || len(entries) > 0 {
		return
	}
	mountinfo.UnmountAll(filepath.Join(d.cfg.stateDir(), "null-netns"))
}

// Sweep destroys containers and directories of sandboxes not in keep.
func (d *Driver) Sweep(ctx context.Context, keep map[string]bool) ([]string, error) {
	found := map[string]bool{}
	statuses, err := d.Statuses(ctx)
	if err != nil {
		return nil, err
	}
	for id := range statuses {
		found[id] = true
	}
	entries, err := os.ReadDir(d.cfg.sandboxesDir())
	if err != nil {
		return nil, fmt.Errorf("read sandboxes dir: %w", err)
	}
	for _, e := range entries {
		found[e.Name()] = true
	}
	var removed []string
	var errs []error
	for id := range found {
		if keep[id] {
			continue
		}
		if err := d.Destroy(ctx, id); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, id)
	}
	return removed, errors.Join(errs...)
}
