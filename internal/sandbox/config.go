package sandbox

import (
	"fmt"
	"regexp"
	"runtime"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// Config holds the defaults applied to requests and the maximums an
// operator allows. Zero fields take the values in withDefaults.
type Config struct {
	DefaultRuntime      string
	DefaultTemplate     string
	DefaultTimeout      time.Duration // sandbox time-to-live
	MaxTimeout          time.Duration
	DefaultCPUs         float64
	MaxCPUs             float64
	DefaultMemoryMB     int64
	MaxMemoryMB         int64
	DefaultDiskMB       int64
	MaxDiskMB           int64
	PidsLimit           int64 // default pids limit of a sandbox
	MaxPidsLimit        int64
	DefaultExecTimeout  time.Duration
	DefaultOutputBytes  int64 // per stream, buffered exec
	MaxOutputBytes      int64
	MaxStreamBytes      int64 // per stream, streamed exec: the rest is discarded
	AgentConnectTimeout time.Duration
}

func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defInt := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	if c.DefaultRuntime == "" {
		c.DefaultRuntime = api.RuntimeGVisor
	}
	if c.DefaultTemplate == "" {
		c.DefaultTemplate = "base"
	}
	def(&c.DefaultTimeout, 15*time.Minute)
	def(&c.MaxTimeout, 24*time.Hour)
	def(&c.DefaultExecTimeout, 5*time.Minute)
	def(&c.AgentConnectTimeout, 30*time.Second)
	if c.DefaultCPUs == 0 {
		c.DefaultCPUs = 1
	}
	if c.MaxCPUs == 0 {
		c.MaxCPUs = float64(runtime.NumCPU())
	}
	defInt(&c.DefaultMemoryMB, 512)
	defInt(&c.MaxMemoryMB, 8192)
	defInt(&c.DefaultDiskMB, 2048)
	defInt(&c.MaxDiskMB, 65536)
	defInt(&c.PidsLimit, 1024)
	defInt(&c.MaxPidsLimit, 16384)
	defInt(&c.DefaultOutputBytes, 1<<20)
	defInt(&c.MaxOutputBytes, 64<<20)
	defInt(&c.MaxStreamBytes, 1<<30)
	return c
}

var (
	labelKeyRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$`)
	envKeyRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errdefs.ErrInvalidArgument, fmt.Sprintf(format, args...))
}

func (c Config) checkTimeout(seconds int64) error {
	if seconds <= 0 || seconds > int64(c.MaxTimeout/time.Second) { // (seconds*time.Second could overflow)
		return invalid("timeout_seconds must be between 1 and %d, got %d", int64(c.MaxTimeout/time.Second), seconds)
	}
	return nil
}

// resolve validates a create request and fills in defaults.
func (c Config) resolve(req api.CreateSandboxRequest) (api.Sandbox, error) {
	sb := api.Sandbox{
		Template: req.Template, Runtime: req.Runtime, CPUs: req.CPUs,
		MemoryMB: req.MemoryMB, DiskMB: req.DiskMB, TimeoutSeconds: req.TimeoutSeconds,
		PidsLimit: req.PidsLimit, Env: req.Env, Labels: req.Labels,
	}
	if sb.Template == "" {
		sb.Template = c.DefaultTemplate
	}
	if sb.Runtime == "" {
		sb.Runtime = c.DefaultRuntime
	}
	if sb.Runtime != api.RuntimeGVisor && sb.Runtime != api.RuntimeRunc {
		return sb, invalid("runtime must be %q or %q, got %q", api.RuntimeGVisor, api.RuntimeRunc, sb.Runtime)
	}
	if sb.CPUs == 0 {
		sb.CPUs = c.DefaultCPUs
	}
	if sb.CPUs < 0.05 || sb.CPUs > c.MaxCPUs {
		return sb, invalid("cpus must be between 0.05 and %g, got %g", c.MaxCPUs, sb.CPUs)
	}
	if sb.MemoryMB == 0 {
		sb.MemoryMB = c.DefaultMemoryMB
	}
	if sb.MemoryMB < 32 || sb.MemoryMB > c.MaxMemoryMB {
		return sb, invalid("memory_mb must be between 32 and %d, got %d", c.MaxMemoryMB, sb.MemoryMB)
	}
	if sb.DiskMB == 0 {
		sb.DiskMB = c.DefaultDiskMB
	}
	if sb.DiskMB < 16 || sb.DiskMB > c.MaxDiskMB {
		return sb, invalid("disk_mb must be between 16 and %d, got %d", c.MaxDiskMB, sb.DiskMB)
	}
	if sb.PidsLimit == 0 {
		sb.PidsLimit = c.PidsLimit
	}
	// The agent, an exec's shim and a shell need a few pids of their own.
	if sb.PidsLimit < 32 || sb.PidsLimit > c.MaxPidsLimit {
		return sb, invalid("pids_limit must be between 32 and %d, got %d", c.MaxPidsLimit, sb.PidsLimit)
	}
	if sb.TimeoutSeconds == 0 {
		sb.TimeoutSeconds = int64(c.DefaultTimeout / time.Second)
	}
	if err := c.checkTimeout(sb.TimeoutSeconds); err != nil {
		return sb, err
	}
	for k := range sb.Env {
		if !envKeyRE.MatchString(k) {
			return sb, invalid("env name %q is not a valid variable name", k)
		}
	}
	if len(sb.Labels) > 64 {
		return sb, invalid("at most 64 labels, got %d", len(sb.Labels))
	}
	for k, v := range sb.Labels {
		if !labelKeyRE.MatchString(k) {
			return sb, invalid("label key %q must match %s", k, labelKeyRE)
		}
		if len(v) > 256 {
			return sb, invalid("label %q value is longer than 256 bytes", k)
		}
	}
	return sb, nil
}
