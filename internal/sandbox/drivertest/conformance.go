// Package drivertest is the conformance suite every sandbox driver runs:
// the lifecycle contract the Manager relies on, exercised against the real
// runtime.
package drivertest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/sandbox"
)

// Run checks that drv honours the sandbox.Driver contract. spec must
// describe a startable sandbox; its ID is replaced per subtest.
func Run(t *testing.T, drv sandbox.Driver, spec sandbox.Spec) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	t.Run("lifecycle", func(t *testing.T) {
		spec := spec
		spec.ID = "conf-" + shortName(t)
		if st, err := drv.Status(ctx, spec.ID); err != nil || st != sandbox.StatusMissing {
			t.Fatalf("status before start: %v %v, want missing", st, err)
		}
		if err := drv.Start(ctx, spec); err != nil {
			t.Fatalf("start: %v", err)
		}
		defer drv.Destroy(context.WithoutCancel(ctx), spec.ID)
		if st, err := drv.Status(ctx, spec.ID); err != nil || st != sandbox.StatusRunning {
			t.Fatalf("status after start: %v %v, want running", st, err)
		}
		c := connect(ctx, t, drv, spec.ID)
		var out bytes.Buffer
		st, err := c.Exec(ctx, agentproto.Request{Argv: []string{"/bin/sh", "-c", "echo ok; exit 4"}}, agentproto.ExecIO{Stdout: &out})
		if err != nil || st.Code != 4 || out.String() != "ok\n" {
			t.Fatalf("exec through agent: %+v %q %v", st, out.String(), err)
		}
		// The agent redials when its connection drops: Connect must
		// deliver a fresh one (this is how a restarted daemon re-adopts).
		c.Close()
		c2 := connect(ctx, t, drv, spec.ID)
		if _, err := c2.Hello(ctx); err != nil {
			t.Fatalf("hello after reconnect: %v", err)
		}
		c2.Close()
		if err := drv.Destroy(ctx, spec.ID); err != nil {
			t.Fatalf("destroy: %v", err)
		}
		if st, err := drv.Status(ctx, spec.ID); err != nil || st != sandbox.StatusMissing {
			t.Fatalf("status after destroy: %v %v, want missing", st, err)
		}
		if err := drv.Destroy(ctx, spec.ID); err != nil {
			t.Fatalf("second destroy: %v", err)
		}
	})

	t.Run("destroy missing", func(t *testing.T) {
		if err := drv.Destroy(ctx, "conf-never-created"); err != nil {
			t.Fatalf("destroy of a missing sandbox: %v", err)
		}
	})

	if sw, ok := drv.(sandbox.Sweeper); ok {
		t.Run("sweep", func(t *testing.T) {
			spec := spec
			spec.ID = "conf-sweep-" + shortName(t)
			if err := drv.Start(ctx, spec); err != nil {
				t.Fatalf("start: %v", err)
			}
			removed, err := sw.Sweep(ctx, map[string]bool{})
			if err != nil {
				t.Fatalf("sweep: %v", err)
			}
			found := false
			for _, id := range removed {
				found = found || id == spec.ID
			}
			if !found {
				drv.Destroy(ctx, spec.ID)
				t.Fatalf("sweep did not remove %s (removed %v)", spec.ID, removed)
			}
			if st, _ := drv.Status(ctx, spec.ID); st != sandbox.StatusMissing {
				t.Fatalf("swept sandbox still %v", st)
			}
		})
	}
}

func connect(ctx context.Context, t *testing.T, drv sandbox.Driver, id string) *agentproto.Client {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := drv.Connect(cctx, id)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	c, err := agentproto.NewClient(conn)
	if err != nil {
		t.Fatalf("mux: %v", err)
	}
	if _, err := c.Hello(cctx); err != nil {
		c.Close()
		t.Fatalf("hello: %v", err)
	}
	return c
}

func shortName(t *testing.T) string {
	b := []byte{}
	for _, r := range t.Name() {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b = append(b, byte(r))
		}
		if len(b) == 12 {
			break
		}
	}
	return string(b) + time.Now().Format("150405")
}
