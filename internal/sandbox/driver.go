package sandbox

import (
	"context"
	"errors"
	"net"
)

// Spec is what a driver needs to start a sandbox. It is derived from the
// stored record, so a driver can be handed it again after a restart.
type Spec struct {
	ID           string
	Template     string
	TemplatePath string // root filesystem of the template, for drivers that use one
	CPUs         float64
	MemoryMB     int64
	DiskMB       int64
	PidsLimit    int64
	Network      *NetworkAttachment // nil: no network (loopback only)
}

// Status is what a driver knows about a sandbox.
type Status int

const (
	StatusMissing Status = iota // the driver has nothing for this id
	StatusRunning
	StatusStopped // exists but is not running
)

// ErrDriverUnavailable is returned when a runtime is not installed.
var ErrDriverUnavailable = errors.New("runtime not available")

// Driver manages sandbox lifecycle for one runtime. Everything that happens
// inside a sandbox goes through its agent; a driver only starts and destroys
// sandboxes and hands the daemon connections to their agents, so microVM,
// Docker and Kubernetes drivers fit behind the same four calls.
type Driver interface {
	// Start creates and starts the sandbox; its agent connects afterwards.
	Start(ctx context.Context, spec Spec) error
	// Connect blocks until the sandbox's agent is reachable and returns a
	// byte stream to it. It is called again whenever a connection dies,
	// including after a daemon restart.
	Connect(ctx context.Context, id string) (net.Conn, error)
	// Status reports whether the sandbox exists and runs.
	Status(ctx context.Context, id string) (Status, error)
	// Destroy stops the sandbox and removes every resource it held:
	// processes, mounts, cgroups, files. Destroying a missing sandbox is
	// not an error.
	Destroy(ctx context.Context, id string) error
}

// StatusLister is an optional Driver capability: the status of every
// sandbox the driver holds in one call (absent ids are missing), so that
// recovery after a restart asks the runtime once, not once per sandbox.
type StatusLister interface {
	Statuses(ctx context.Context) (map[string]Status, error)
}

// Sweeper is an optional Driver capability: destroy whatever the driver
// holds for sandboxes that are not in keep (leftovers of a crash).
type Sweeper interface {
	Sweep(ctx context.Context, keep map[string]bool) (removed []string, err error)
}
