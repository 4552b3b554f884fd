// Package api holds the JSON wire types of Airlock's HTTP API (/v1). The
// daemon and the Go SDK both use them, so the two cannot drift apart.
package api

import "time"

// Sandbox states.
const (
	StateCreating = "creating"
	StateRunning  = "running"
	StateStopped  = "stopped"
)

// Runtimes a sandbox can run under.
const (
	RuntimeGVisor = "gvisor"
	RuntimeRunc   = "runc"
)

// CreateSandboxRequest is the body of POST /v1/sandboxes. Zero values take
// the daemon's defaults.
type CreateSandboxRequest struct {
	Template       string            `json:"template,omitempty"`
	Runtime        string            `json:"runtime,omitempty"`
	CPUs           float64           `json:"cpus,omitempty"`
	MemoryMB       int64             `json:"memory_mb,omitempty"`
	DiskMB         int64             `json:"disk_mb,omitempty"`
	PidsLimit      int64             `json:"pids_limit,omitempty"`
	TimeoutSeconds int64             `json:"timeout_seconds,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	// Network is the egress policy; nil means mode none.
	Network *NetworkPolicy `json:"network,omitempty"`
	// Secrets names registered secrets the sandbox gets as environment
	// variables holding placeholders; see NETWORK.md.
	Secrets []string `json:"secrets,omitempty"`
}

// Sandbox describes one sandbox.
type Sandbox struct {
	ID             string            `json:"id"`
	Owner          string            `json:"owner"`
	Template       string            `json:"template"`
	Runtime        string            `json:"runtime"`
	State          string            `json:"state"`
	CPUs           float64           `json:"cpus"`
	MemoryMB       int64             `json:"memory_mb"`
	DiskMB         int64             `json:"disk_mb"`
	PidsLimit      int64             `json:"pids_limit"`
	TimeoutSeconds int64             `json:"timeout_seconds"`
	Env            map[string]string `json:"env,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	Network        SandboxNetwork    `json:"network"`
	Secrets        []string          `json:"secrets,omitempty"`
	CreatedAt      time.Time         `json:"created_at"`
	ExpiresAt      time.Time         `json:"expires_at"`
}

// SandboxList is the body of GET /v1/sandboxes.
type SandboxList struct {
	Sandboxes []Sandbox `json:"sandboxes"`
}

// SetTimeoutRequest is the body of POST /v1/sandboxes/{id}/timeout: the
// sandbox then expires timeout_seconds from now.
type SetTimeoutRequest struct {
	TimeoutSeconds int64 `json:"timeout_seconds"`
}

// ExecRequest is the body of POST /v1/sandboxes/{id}/exec. Exactly one of
// Cmd (an argv, run directly) and Shell (run by /bin/sh -c) is set.
type ExecRequest struct {
	Cmd            []string          `json:"cmd,omitempty"`
	Shell          string            `json:"shell,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	Cwd            string            `json:"cwd,omitempty"`
	User           string            `json:"user,omitempty"`
	Stdin          []byte            `json:"stdin,omitempty"`
	TimeoutSeconds float64           `json:"timeout_seconds,omitempty"`
	// MaxOutputBytes caps each of stdout and stderr in a buffered response.
	MaxOutputBytes int64 `json:"max_output_bytes,omitempty"`
}

// ExecResult is the buffered response of an exec, and the payload of the
// final "exit" event of a streamed one (without Stdout and Stderr).
type ExecResult struct {
	Stdout          string  `json:"stdout"`
	Stderr          string  `json:"stderr"`
	ExitCode        int     `json:"exit_code"`
	Signal          string  `json:"signal,omitempty"`
	TimedOut        bool    `json:"timed_out"`
	OOMKilled       bool    `json:"oom_killed"` // the sandbox hit its memory limit and the kernel killed the command
	StdoutTruncated bool    `json:"stdout_truncated"`
	StderrTruncated bool    `json:"stderr_truncated"`
	DurationMS      float64 `json:"duration_ms"`
}

// Exec event types of a streamed exec (NDJSON lines or SSE events).
const (
	EventStart  = "start"
	EventStdout = "stdout"
	EventStderr = "stderr"
	EventExit   = "exit"
	EventError  = "error"
)

// ExecEvent is one event of a streamed exec. Data carries raw output bytes
// (base64 in JSON) so binary output survives.
type ExecEvent struct {
	Type      string      `json:"type"`
	PID       int         `json:"pid,omitempty"`
	SandboxID string      `json:"sandbox_id,omitempty"` // start event of POST /v1/run
	Data      []byte      `json:"data,omitempty"`
	Exit      *ExecResult `json:"exit,omitempty"`
	Error     *ErrorBody  `json:"error,omitempty"`
}

// RunRequest is the body of POST /v1/run: create a sandbox, exec, delete.
// With Code set instead of Exec, the code runs in the new sandbox's
// default context of its language and the response is a RunCodeResult.
type RunRequest struct {
	Sandbox CreateSandboxRequest `json:"sandbox"`
	Exec    ExecRequest          `json:"exec"`
	Code    *RunCodeRequest      `json:"code,omitempty"`
}

// RunResult is the response of POST /v1/run.
type RunResult struct {
	SandboxID string `json:"sandbox_id"`
	ExecResult
}

// FileInfo describes one file inside a sandbox.
type FileInfo struct {
	Name       string    `json:"name"`
	Path       string    `json:"path"`
	Type       string    `json:"type"` // file, dir, symlink, other
	Size       int64     `json:"size"`
	Mode       uint32    `json:"mode"`
	ModTime    time.Time `json:"mod_time"`
	LinkTarget string    `json:"link_target,omitempty"`
	UID        int       `json:"uid"`
	GID        int       `json:"gid"`
}

// FileList is the body of GET /v1/sandboxes/{id}/files/list.
type FileList struct {
	Files []FileInfo `json:"files"`
}

// MkdirRequest is the body of POST /v1/sandboxes/{id}/files/mkdir.
type MkdirRequest struct {
	Path    string `json:"path"`
	Parents bool   `json:"parents,omitempty"`
}

// RenameRequest is the body of POST /v1/sandboxes/{id}/files/rename.
type RenameRequest struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// UploadResult is the response of a file upload.
type UploadResult struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// Template describes a built root filesystem template.
type Template struct {
	Name      string    `json:"name"`
	SizeBytes int64     `json:"size_bytes"`
	Builder   string    `json:"builder"`
	BuiltAt   time.Time `json:"built_at"`
	Packages  []string  `json:"packages,omitempty"`
}

// TemplateList is the body of GET /v1/templates.
type TemplateList struct {
	Templates []Template `json:"templates"`
}

// BuildTemplateRequest is the body of POST /v1/templates/{name}/build.
type BuildTemplateRequest struct {
	Force bool `json:"force,omitempty"`
}

// TemplateBuildEvent is one NDJSON line of POST /v1/templates/{name}/build:
// progress lines ("log"), then the built template ("done") or an error.
type TemplateBuildEvent struct {
	Type     string     `json:"type"`
	Line     string     `json:"line,omitempty"`
	Template *Template  `json:"template,omitempty"`
	Error    *ErrorBody `json:"error,omitempty"`
}

// Error codes in ErrorBody.Code.
const (
	CodeInvalidArgument   = "invalid_argument"
	CodeNotFound          = "not_found"
	CodeConflict          = "conflict"
	CodeResourceExhausted = "resource_exhausted"
	CodeUnavailable       = "unavailable"
	CodeDeadlineExceeded  = "deadline_exceeded"
	CodeInternal          = "internal"
)

// ErrorBody is the payload of every error response.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ErrorResponse is the body of every non-2xx response.
type ErrorResponse struct {
	Error ErrorBody `json:"error"`
}

// Info is the body of GET /v1/info.
type Info struct {
	Version        string   `json:"version"`
	Runtimes       []string `json:"runtimes"`
	DefaultRuntime string   `json:"default_runtime"`
	Templates      []string `json:"templates"`
}
