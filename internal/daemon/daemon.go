// Package daemon assembles the Airlock daemon: state store, templates,
// runtime drivers, sandbox manager and HTTP API, on embedded defaults.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"github.com/airlockdev/airlock/internal/reaper"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/driver/oci"
	"github.com/airlockdev/airlock/internal/network"
	"github.com/airlockdev/airlock/internal/sandbox"
	"github.com/airlockdev/airlock/internal/secrets"
	"github.com/airlockdev/airlock/internal/server"
	"github.com/airlockdev/airlock/internal/store"
	"github.com/airlockdev/airlock/internal/template"
)

// Defaults for the daemon's flags.
const (
	DefaultListen  = "127.0.0.1:7878"
	DefaultDataDir = "/var/lib/airlock"
)

// Config configures a daemon.
type Config struct {
	Listen  string
	DataDir string
	// TemplatesDir holds built templates (default DataDir/templates); it
	// may be shared by several daemons.
	TemplatesDir string
	AgentBinary  string // default: airlock-agent beside the running binary, then PATH
	RunscPath    string // default "runsc"
	RuncPath     string // default "runc"
	RunscFlags   []string
	// BuildTemplates are built before serving when not cached.
	BuildTemplates []string
	Sandbox        sandbox.Config
	Network        NetworkConfig
	Log            *slog.Logger
	// Progress receives template build output (default stderr).
	Progress io.Writer
}

// Run serves until ctx ends. Sandboxes keep running after it returns; the
// next daemon on the same data directory re-adopts them.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Progress == nil {
		cfg.Progress = os.Stderr
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.DataDir == "" {
		cfg.DataDir = DefaultDataDir
	}
	// Runtime monitor processes are reparented to the daemon and reaped at
	// once, not left to the host's init (see package reaper).
	if err := reaper.Enable(); err != nil {
		cfg.Log.Warn("cannot become a child subreaper; sandbox deletion may be slow", "err", err)
	}
	d, err := Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer d.Close()

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	srv := &http.Server{
		Handler:           d.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	cfg.Log.Info("airlock serving", "addr", ln.Addr().String(), "data", cfg.DataDir, "runtimes", d.manager.Runtimes(), "default_runtime", d.manager.Config().DefaultRuntime)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	return nil
}

// Daemon is an opened daemon, ready to serve.
type Daemon struct {
	store     *store.Store
	templates *template.Store
	network   *network.Manager
	manager   *sandbox.Manager
	handler   http.Handler
}

// Open locks the data directory, sets up drivers, builds missing templates,
// and re-adopts or reclaims the sandboxes of a previous run.
func Open(ctx context.Context, cfg Config) (*Daemon, error) {
	st, err := store.Open(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	d := &Daemon{store: st}
	ok := false
	defer func() {
		if !ok {
			d.Close()
		}
	}()
	if cfg.TemplatesDir == "" {
		cfg.TemplatesDir = filepath.Join(cfg.DataDir, "templates")
	}
	d.templates = template.NewStore(cfg.TemplatesDir)
	for _, name := range cfg.BuildTemplates {
		if d.templates.UpToDate(name) {
			continue
		}
		fmt.Fprintf(cfg.Progress, "building template %q (first start only; cached afterwards)\n", name)
		if _, err := d.templates.Build(ctx, name, template.BuildOptions{}, cfg.Progress); err != nil {
			return nil, fmt.Errorf("build template %s: %w", name, err)
		}
	}
	agent, err := installAgent(cfg)
	if err != nil {
		return nil, err
	}
	drivers := map[string]sandbox.Driver{}
	var derrs []error
	for _, rt := range []struct{ name, flavour, bin string }{
		{api.RuntimeGVisor, oci.GVisor, orDefault(cfg.RunscPath, "runsc")},
		{api.RuntimeRunc, oci.Runc, orDefault(cfg.RuncPath, "runc")},
	} {
		var flags []string
		if rt.flavour == oci.GVisor {
			flags = cfg.RunscFlags
		}
		drv, err := oci.New(oci.Config{
			Flavour: rt.flavour, Binary: rt.bin, AgentBinary: agent, ExtraFlags: flags,
			Dir: filepath.Join(cfg.DataDir, "drivers", rt.name),
		})
		if err != nil {
			derrs = append(derrs, err)
			cfg.Log.Warn("runtime unavailable", "runtime", rt.name, "err", err)
			continue
		}
		drivers[rt.name] = drv
	}
	if len(drivers) == 0 {
		return nil, fmt.Errorf("no sandbox runtime available (install runsc or runc): %w", errors.Join(derrs...))
	}
	scfg := cfg.Sandbox
	if scfg.DefaultRuntime == "" {
		scfg.DefaultRuntime = api.RuntimeGVisor
		if _, ok := drivers[api.RuntimeGVisor]; !ok {
			scfg.DefaultRuntime = api.RuntimeRunc
		}
	}
	d.manager, err = sandbox.New(scfg, st, templateRoots{d.templates}, drivers, cfg.Log)
	if err != nil {
		return nil, err
	}
	secretReg := secrets.New(st)
	if err := d.openNetwork(cfg, secretReg); err != nil {
		return nil, err
	}
	if err := d.manager.Start(ctx); err != nil {
		return nil, fmt.Errorf("recover sandboxes: %w", err)
	}
	d.handler = server.New(d.manager, templateAPI{d.templates}, cfg.Log).WithSecrets(secretReg)
	ok = true
	return d, nil
}

// Handler is the HTTP API.
func (d *Daemon) Handler() http.Handler { return d.handler }

// Manager is the sandbox manager.
func (d *Daemon) Manager() *sandbox.Manager { return d.manager }

// Close stops background work and releases the data directory. Sandboxes
// keep running.
func (d *Daemon) Close() {
	if d.manager != nil {
		d.manager.Close()
	}
	if d.network != nil {
		d.network.Close()
	}
	d.store.Close()
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// installAgent copies the static agent binary into the data directory, so
// running sandboxes keep a stable, root-owned, read-only copy to bind-mount
// even when the installed binary is replaced.
func installAgent(cfg Config) (string, error) {
	src := cfg.AgentBinary
	if src == "" {
		if exe, err := os.Executable(); err == nil {
			cand := filepath.Join(filepath.Dir(exe), "airlock-agent")
			if _, err := os.Stat(cand); err == nil {
				src = cand
			}
		}
	}
	if src == "" {
		p, err := exec.LookPath("airlock-agent")
		if err != nil {
			return "", errors.New("airlock-agent binary not found beside airlock or in PATH; build it with CGO_ENABLED=0 go build ./cmd/airlock-agent")
		}
		src = p
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("read agent binary: %w", err)
	}
	dir := filepath.Join(cfg.DataDir, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, "airlock-agent")
	if old, err := os.ReadFile(dst); err == nil && string(old) == string(b) {
		return dst, nil
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, b, 0o555); err != nil {
		return "", fmt.Errorf("install agent binary: %w", err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return "", fmt.Errorf("install agent binary: %w", err)
	}
	return dst, nil
}
