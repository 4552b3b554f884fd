package api

import "time"

// StartProcessRequest is the body of POST /v1/sandboxes/{id}/processes: a
// background process that outlives the request. Exactly one of Cmd and
// Shell is set, except with PTY, where neither starts the user's login
// shell.
type StartProcessRequest struct {
	Cmd   []string          `json:"cmd,omitempty"`
	Shell string            `json:"shell,omitempty"`
	Env   map[string]string `json:"env,omitempty"`
	Cwd   string            `json:"cwd,omitempty"`
	User  string            `json:"user,omitempty"`
	// Tag names the process for later requests, like its pid: 1-64
	// letters, digits, '_', '.' or '-', not all digits. Unique among
	// running processes.
	Tag string `json:"tag,omitempty"`
	// Stdin keeps a pipe to the process's stdin open for
	// POST .../stdin; otherwise it reads /dev/null.
	Stdin bool `json:"stdin,omitempty"`
	// PTY runs the process on a pseudo-terminal of this size.
	PTY *PTYSize `json:"pty,omitempty"`
}

// PTYSize is a terminal size in character cells. Zero fields default to
// 80 columns and 24 rows.
type PTYSize struct {
	Cols int `json:"cols,omitempty"`
	Rows int `json:"rows,omitempty"`
}

// Process describes a background process of a sandbox.
type Process struct {
	PID       int       `json:"pid"`
	Tag       string    `json:"tag,omitempty"`
	Cmd       []string  `json:"cmd"`
	PTY       bool      `json:"pty"`
	Stdin     bool      `json:"stdin"` // stdin is open for input
	Running   bool      `json:"running"`
	StartedAt time.Time `json:"started_at"`
	// ExitCode is set once the process exited: its code, or 128+signal.
	ExitCode *int       `json:"exit_code,omitempty"`
	Signal   string     `json:"signal,omitempty"`
	ExitedAt *time.Time `json:"exited_at,omitempty"`
	// OutputBytes counts all output; DroppedBytes how much of it no
	// longer fits the buffer (1 MiB per process) and cannot be replayed.
	OutputBytes  int64 `json:"output_bytes"`
	DroppedBytes int64 `json:"dropped_bytes"`
}

// ProcessList is the body of GET /v1/sandboxes/{id}/processes.
type ProcessList struct {
	Processes []Process `json:"processes"`
}

// Event types of GET /v1/sandboxes/{id}/processes/{sel}/output, besides
// EventStart, EventStdout, EventStderr, EventExit and EventError.
const (
	EventPTY     = "pty"     // terminal output of a PTY process
	EventDropped = "dropped" // output was lost: the reader fell behind the buffer
	EventRunning = "running" // ?follow=false: the buffered output ends, the process runs on
)

// ProcessEvent is one event of a process output stream: "start" (the
// process, and in Dropped the bytes already lost before the first output
// event), "stdout"/"stderr"/"pty" (raw bytes, base64 in JSON), "dropped",
// then "exit" or "running" carrying the process, or "error".
type ProcessEvent struct {
	Type    string     `json:"type"`
	Data    []byte     `json:"data,omitempty"`
	Dropped int64      `json:"dropped,omitempty"`
	Process *Process   `json:"process,omitempty"`
	Error   *ErrorBody `json:"error,omitempty"`
}

// SignalRequest is the body of POST /v1/sandboxes/{id}/processes/{sel}/signal.
type SignalRequest struct {
	// Signal is a name (TERM, SIGTERM, INT, KILL, HUP, ...) or a number.
	Signal string `json:"signal"`
}

// StdinResult is the response of POST /v1/sandboxes/{id}/processes/{sel}/stdin.
type StdinResult struct {
	Bytes int64 `json:"bytes"`
}

// PTY WebSocket (GET /v1/sandboxes/{id}/pty) text message types. Binary
// messages carry terminal bytes both ways.
const (
	PTYMessageResize = "resize" // client: cols, rows
	PTYMessageSignal = "signal" // client: signal
	PTYMessageStart  = "start"  // server, first: pid, tag
	PTYMessageExit   = "exit"   // server, last: exit_code, signal
)

// PTYMessage is a text (JSON) message on the PTY WebSocket.
type PTYMessage struct {
	Type     string `json:"type"`
	Cols     int    `json:"cols,omitempty"`
	Rows     int    `json:"rows,omitempty"`
	Signal   string `json:"signal,omitempty"`
	PID      int    `json:"pid,omitempty"`
	Tag      string `json:"tag,omitempty"`
	ExitCode *int   `json:"exit_code,omitempty"`
}
