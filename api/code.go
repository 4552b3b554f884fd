package api

import (
	"encoding/json"
	"time"
)

// Languages of code contexts.
const (
	LanguagePython     = "python"
	LanguageJavaScript = "javascript"
	LanguageBash       = "bash"
)

// CreateContextRequest is the body of POST /v1/sandboxes/{id}/contexts. A
// context is a live interpreter whose state (variables, imports,
// functions, working directory) persists from one run to the next.
type CreateContextRequest struct {
	// Language is python (default), javascript or bash.
	Language string `json:"language,omitempty"`
	// Cwd is the interpreter's working directory (default: the user's home).
	Cwd string `json:"cwd,omitempty"`
	// Env is added to the sandbox's environment for the interpreter.
	Env map[string]string `json:"env,omitempty"`
	// User runs the interpreter (default: the template's user).
	User string `json:"user,omitempty"`
}

// CodeContext describes a code context of a sandbox.
type CodeContext struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
	User     string `json:"user"`
	// Default marks the context a run without context_id uses for its
	// language; it is created on first use.
	Default bool `json:"default"`
	// PID is the interpreter's, 0 when none runs (it died: the next run
	// starts a fresh one).
	PID int `json:"pid"`
	// ExecutionCount counts the runs of the current interpreter.
	ExecutionCount int       `json:"execution_count"`
	CreatedAt      time.Time `json:"created_at"`
}

// CodeContextList is the body of GET /v1/sandboxes/{id}/contexts.
type CodeContextList struct {
	Contexts []CodeContext `json:"contexts"`
}

// RunCodeRequest is the body of POST /v1/sandboxes/{id}/code: run code in
// a context (ContextID), or in the default context of Language.
type RunCodeRequest struct {
	Code string `json:"code"`
	// Language selects the default context when ContextID is empty:
	// python (default), javascript or bash. With ContextID it must be
	// empty or the context's language.
	Language  string `json:"language,omitempty"`
	ContextID string `json:"context_id,omitempty"`
	// Env applies to this run only.
	Env map[string]string `json:"env,omitempty"`
	// TimeoutSeconds interrupts the code after this long (default: the
	// daemon's exec timeout). The context survives with its earlier state.
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
	// MaxOutputBytes caps each of stdout and stderr in a buffered response.
	MaxOutputBytes int64 `json:"max_output_bytes,omitempty"`
}

// CodeOutput is one rich output of a run: a value in one or more MIME
// types, keyed by MIME type in JSON. Images are base64 in JSON.
type CodeOutput struct {
	Text       string          `json:"text/plain,omitempty"`
	HTML       string          `json:"text/html,omitempty"`
	Markdown   string          `json:"text/markdown,omitempty"`
	LaTeX      string          `json:"text/latex,omitempty"`
	SVG        string          `json:"image/svg+xml,omitempty"`
	PNG        []byte          `json:"image/png,omitempty"`
	JPEG       []byte          `json:"image/jpeg,omitempty"`
	JSON       json.RawMessage `json:"application/json,omitempty"`
	JavaScript string          `json:"application/javascript,omitempty"`
	// IsMainResult marks the value of the code's last expression, as
	// opposed to outputs displayed along the way (figures).
	IsMainResult bool `json:"is_main_result,omitempty"`
}

// CodeError is an error the code raised (or, for bash, a non-zero exit
// status: name "ExitStatus").
type CodeError struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

// Names of CodeError set by Airlock rather than by the code.
const (
	// CodeErrorTimeout: the run was interrupted by its timeout. The
	// traceback, if any, shows where the code was.
	CodeErrorTimeout = "TimeoutError"
	// CodeErrorContextDied: the interpreter exited or was killed during
	// the run; its state is lost (ContextLost).
	CodeErrorContextDied = "ContextDied"
	// CodeErrorExitStatus: a bash run ended with a non-zero status.
	CodeErrorExitStatus = "ExitStatus"
)

// CodeResult is the buffered response of a run, and the payload of the
// final "end" event of a streamed one (without Stdout, Stderr and
// Results, which were sent as events).
type CodeResult struct {
	ContextID      string       `json:"context_id"`
	ExecutionCount int          `json:"execution_count"`
	Stdout         string       `json:"stdout"`
	Stderr         string       `json:"stderr"`
	Results        []CodeOutput `json:"results"`
	Error          *CodeError   `json:"error,omitempty"`
	TimedOut       bool         `json:"timed_out"`
	// ContextLost: the interpreter died during this run (os._exit,
	// process.exit, killed after ignoring the timeout's interrupt).
	ContextLost bool `json:"context_lost"`
	// ContextRestarted: this run started a fresh interpreter because the
	// previous one had died; the context's earlier state is gone.
	ContextRestarted bool    `json:"context_restarted"`
	StdoutTruncated  bool    `json:"stdout_truncated"`
	StderrTruncated  bool    `json:"stderr_truncated"`
	ResultsTruncated bool    `json:"results_truncated"`
	DurationMS       float64 `json:"duration_ms"`
}

// Event types of a streamed run, besides EventStart, EventStdout,
// EventStderr and EventError (the code's error, a CodeError).
const (
	EventResult  = "result"
	EventEnd     = "end"
	EventFailure = "failure" // the run could not complete; Failure says why
)

// CodeEvent is one event of a streamed run (NDJSON line or SSE event).
type CodeEvent struct {
	Type      string      `json:"type"`
	ContextID string      `json:"context_id,omitempty"` // start
	SandboxID string      `json:"sandbox_id,omitempty"` // start of POST /v1/run
	Data      []byte      `json:"data,omitempty"`       // stdout, stderr
	Result    *CodeOutput `json:"result,omitempty"`     // result
	Error     *CodeError  `json:"error,omitempty"`      // error
	End       *CodeResult `json:"end,omitempty"`        // end
	Failure   *ErrorBody  `json:"failure,omitempty"`    // failure
}

// RunCodeResult is the buffered response of POST /v1/run with code.
type RunCodeResult struct {
	SandboxID string `json:"sandbox_id"`
	CodeResult
}
