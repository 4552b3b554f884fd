package agentproto

import (
	"errors"
	"fmt"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// Operations named in Request.Op.
const (
	OpHello  = "hello"
	OpExec   = "exec"
	OpRead   = "read"
	OpWrite  = "write"
	OpStat   = "stat"
	OpList   = "list"
	OpMkdir  = "mkdir"
	OpRemove = "remove"
	OpRename = "rename"
)

// Request is the first frame of every stream. Only the fields of the named
// operation are set.
type Request struct {
	Op string `json:"op"`

	// exec
	Argv      []string `json:"argv,omitempty"`
	Env       []string `json:"env,omitempty"` // KEY=VALUE, added to the agent's defaults
	Cwd       string   `json:"cwd,omitempty"`
	User      string   `json:"user,omitempty"` // name or uid; also owner of created files
	Stdin     bool     `json:"stdin,omitempty"`
	TimeoutMS int64    `json:"timeout_ms,omitempty"`

	// files
	Path      string `json:"path,omitempty"`
	To        string `json:"to,omitempty"`
	Mode      uint32 `json:"mode,omitempty"`
	Parents   bool   `json:"parents,omitempty"`
	Recursive bool   `json:"recursive,omitempty"`
	Depth     int    `json:"depth,omitempty"`
}

// Reply is a JSON reply frame. Error is set when the operation failed.
type Reply struct {
	Error *WireError `json:"error,omitempty"`

	// hello
	Version  int    `json:"version,omitempty"`
	AgentPID int    `json:"agent_pid,omitempty"`
	Hostname string `json:"hostname,omitempty"`

	// exec: the first reply carries PID; the last carries Exit.
	PID  int         `json:"pid,omitempty"`
	Exit *ExitStatus `json:"exit,omitempty"`

	// files
	Info  *api.FileInfo  `json:"info,omitempty"`
	Files []api.FileInfo `json:"files,omitempty"`
	Size  int64          `json:"size,omitempty"`
}

// ExitStatus is how an exec'd process ended.
type ExitStatus struct {
	Code     int    `json:"code"`
	Signal   string `json:"signal,omitempty"`
	TimedOut bool   `json:"timed_out,omitempty"`
	// OOMKilled is set by the daemon from the sandbox's memory cgroup; the
	// agent cannot tell an OOM kill from any other SIGKILL.
	OOMKilled bool `json:"oom_killed,omitempty"`
}

// Control is a mid-stream message from the daemon on an exec stream.
type Control struct {
	Signal string `json:"signal,omitempty"` // e.g. "TERM", "KILL", "INT"
}

// WireError is an error as carried on the wire. Code is one of the api.Code*
// strings so it maps onto errdefs sentinels on the daemon side.
type WireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *WireError) Error() string { return e.Message }

// Unwrap lets errors.Is match the sentinel the code stands for.
func (e *WireError) Unwrap() error {
	switch e.Code {
	case api.CodeNotFound:
		return errdefs.ErrNotFound
	case api.CodeInvalidArgument:
		return errdefs.ErrInvalidArgument
	case api.CodeConflict:
		return errdefs.ErrConflict
	case api.CodeResourceExhausted:
		return errdefs.ErrResourceExhausted
	case api.CodeDeadlineExceeded:
		return errdefs.ErrDeadlineExceeded
	}
	return nil
}

// ToWire converts err for sending, classifying it by the sentinel it wraps.
func ToWire(err error) *WireError {
	code := api.CodeInternal
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		code = api.CodeNotFound
	case errors.Is(err, errdefs.ErrInvalidArgument):
		code = api.CodeInvalidArgument
	case errors.Is(err, errdefs.ErrConflict):
		code = api.CodeConflict
	case errors.Is(err, errdefs.ErrResourceExhausted):
		code = api.CodeResourceExhausted
	case errors.Is(err, errdefs.ErrDeadlineExceeded):
		code = api.CodeDeadlineExceeded
	}
	return &WireError{Code: code, Message: err.Error()}
}

// replyErr returns the reply's error, if any, as a Go error.
func (r Reply) err() error {
	if r.Error != nil {
		return r.Error
	}
	return nil
}

func unexpected(f Frame) error {
	return fmt.Errorf("agentproto: unexpected frame %q", f.Type)
}
