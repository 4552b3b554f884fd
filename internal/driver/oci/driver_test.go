package oci

import (
	"context"
	"github.com/airlockdev/airlock/internal/mountinfo"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/airlockdev/airlock/internal/sandbox"
	"github.com/airlockdev/airlock/internal/sandbox/drivertest"
	"github.com/airlockdev/airlock/internal/template"
)

// fixtures builds the agent and the busybox template once per test binary.
func fixtures(t *testing.T) (agent, rootfs string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the oci driver needs root")
	}
	dir := t.TempDir()
	agent = filepath.Join(dir, "airlock-agent")
	cmd := exec.Command("go", "build", "-o", agent, "github.com/airlockdev/airlock/cmd/airlock-agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build agent: %v\n%s", err, out)
	}
	tdir := os.Getenv("AIRLOCK_TEST_TEMPLATES")
	if tdir == "" {
		tdir = "/var/lib/airlock-test/templates"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	info, err := template.NewStore(tdir).Build(ctx, "busybox", template.BuildOptions{}, io.Discard)
	if err != nil {
		t.Fatalf("busybox template: %v", err)
	}
	return agent, info.Path
}

func TestConformance(t *testing.T) {
	agent, rootfs := fixtures(t)
	for _, f := range []struct{ flavour, bin string }{{GVisor, "runsc"}, {Runc, "runc"}} {
		t.Run(f.flavour, func(t *testing.T) {
			if _, err := exec.LookPath(f.bin); err != nil {
				t.Skipf("%s is not installed", f.bin)
			}
			dir := t.TempDir()
			drv, err := New(Config{Flavour: f.flavour, Binary: f.bin, Dir: dir, AgentBinary: agent})
			if err != nil {
				t.Fatal(err)
			}
			drivertest.Run(t, drv, sandbox.Spec{
				TemplatePath: rootfs, CPUs: 1, MemoryMB: 256, PidsLimit: 256, DiskMB: 256,
			})
			if ms, _ := mountinfo.Under(dir); len(ms) > 0 {
				t.Errorf("mounts left: %v", ms)
			}
		})
	}
}
