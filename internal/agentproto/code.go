package agentproto

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/airlockdev/airlock/api"
)

// Code context operations (docs/AGENT_PROTOCOL.md, "Code contexts").
const (
	OpContextCreate  = "context_create"
	OpContextList    = "context_list"
	OpContextRestart = "context_restart"
	OpContextDelete  = "context_delete"
	OpCodeRun        = "code_run"
)

// MaxCodeEvent bounds one rich output (a JSON line of the D-frame event
// stream of code_run), so a run cannot make either side buffer without
// limit.
const MaxCodeEvent = 32 << 20

// CodeRequest is the request of the context_* and code_run operations.
type CodeRequest struct {
	Op        string `json:"op"`
	ContextID string `json:"context_id,omitempty"`
	// Language of a new context, or of the default context a code_run
	// without ContextID uses.
	Language string `json:"language,omitempty"`

	// context_create; code_run when it creates a default context.
	Cwd  string   `json:"cwd,omitempty"`
	User string   `json:"user,omitempty"`
	Env  []string `json:"env,omitempty"` // KEY=VALUE

	// code_run
	Code      string            `json:"code,omitempty"`
	RunEnv    map[string]string `json:"run_env,omitempty"` // this run only
	TimeoutMS int64             `json:"timeout_ms,omitempty"`
}

// ContextReply is the reply of the context_* operations.
type ContextReply struct {
	Error    *WireError        `json:"error,omitempty"`
	Context  *api.CodeContext  `json:"context,omitempty"`
	Contexts []api.CodeContext `json:"contexts,omitempty"`
}

// CodeRunReply is a reply frame of code_run: the first carries the
// context the code runs in, the last the end of the run.
type CodeRunReply struct {
	Error   *WireError       `json:"error,omitempty"`
	Context *api.CodeContext `json:"context,omitempty"`
	End     *CodeEnd         `json:"end,omitempty"`
}

// CodeEnd is how a run ended.
type CodeEnd struct {
	ExecutionCount   int            `json:"execution_count"`
	Error            *api.CodeError `json:"error,omitempty"`
	TimedOut         bool           `json:"timed_out,omitempty"`
	ContextLost      bool           `json:"context_lost,omitempty"`
	ContextRestarted bool           `json:"context_restarted,omitempty"`
}

// CodeEvent is one line of the JSON-lines stream a code_run carries in D
// frames: a rich output, in order with the O and E frames.
type CodeEvent struct {
	Type   string          `json:"type"` // "result"
	Result json.RawMessage `json:"result,omitempty"`
	Main   bool            `json:"main,omitempty"`
}

// CodeIO receives a run's output as it is produced. Any field may be nil.
type CodeIO struct {
	Stdout    io.Writer
	Stderr    io.Writer
	OnContext func(api.CodeContext)
	OnResult  func(api.CodeOutput) error
}

// CreateContext starts a code context (Op is set).
func (c *Client) CreateContext(ctx context.Context, req CodeRequest) (api.CodeContext, error) {
	req.Op = OpContextCreate
	rep, err := c.contextCall(ctx, req)
	if err != nil {
		return api.CodeContext{}, err
	}
	if rep.Context == nil {
		return api.CodeContext{}, errors.New("agentproto: context reply without context")
	}
	return *rep.Context, nil
}

// ListContexts lists the code contexts.
func (c *Client) ListContexts(ctx context.Context) ([]api.CodeContext, error) {
	rep, err := c.contextCall(ctx, CodeRequest{Op: OpContextList})
	return rep.Contexts, err
}

// RestartContext replaces a context's interpreter with a fresh one.
func (c *Client) RestartContext(ctx context.Context, id string) (api.CodeContext, error) {
	rep, err := c.contextCall(ctx, CodeRequest{Op: OpContextRestart, ContextID: id})
	if err != nil {
		return api.CodeContext{}, err
	}
	if rep.Context == nil {
		return api.CodeContext{}, errors.New("agentproto: context reply without context")
	}
	return *rep.Context, nil
}

// DeleteContext kills a context's interpreter and forgets the context.
func (c *Client) DeleteContext(ctx context.Context, id string) error {
	_, err := c.contextCall(ctx, CodeRequest{Op: OpContextDelete, ContextID: id})
	return err
}

func (c *Client) contextCall(ctx context.Context, req CodeRequest) (ContextReply, error) {
	s, stop, err := c.stream(ctx, req)
	if err != nil {
		return ContextReply{}, err
	}
	defer stop()
	var rep ContextReply
	if err := readTyped(ctx, s, &rep); err != nil {
		return ContextReply{}, err
	}
	if rep.Error != nil {
		return ContextReply{}, rep.Error
	}
	return rep, nil
}

// readTyped reads the next frame, which must be a reply, into v.
func readTyped(ctx context.Context, r io.Reader, v any) error {
	f, err := ReadFrame(r)
	if err != nil {
		return streamErr(ctx, err)
	}
	if f.Type != FrameReply {
		return unexpected(f)
	}
	return f.Decode(v)
}

// RunCode runs code (Op is set to code_run) and streams its output until
// the run ends. Cancelling ctx interrupts the code, as its timeout would.
func (c *Client) RunCode(ctx context.Context, req CodeRequest, cio CodeIO) (CodeEnd, error) {
	req.Op = OpCodeRun
	s, stop, err := c.stream(ctx, req)
	if err != nil {
		return CodeEnd{}, err
	}
	defer stop()
	var first CodeRunReply
	if err := readTyped(ctx, s, &first); err != nil {
		return CodeEnd{}, err
	}
	if first.Error != nil {
		return CodeEnd{}, first.Error
	}
	if first.Context != nil && cio.OnContext != nil {
		cio.OnContext(*first.Context)
	}
	events := &codeEvents{onResult: cio.OnResult}
	for {
		f, err := ReadFrame(s)
		if err != nil {
			return CodeEnd{}, streamErr(ctx, err)
		}
		switch f.Type {
		case FrameStdout:
			err = writeTo(cio.Stdout, f.Payload, "stdout")
		case FrameStderr:
			err = writeTo(cio.Stderr, f.Payload, "stderr")
		case FrameData:
			err = events.write(f.Payload)
		case FrameReply:
			var rep CodeRunReply
			if err := f.Decode(&rep); err != nil {
				return CodeEnd{}, err
			}
			if rep.Error != nil {
				return CodeEnd{}, rep.Error
			}
			if rep.End == nil {
				return CodeEnd{}, errors.New("agentproto: code_run reply without end")
			}
			return *rep.End, nil
		default:
			return CodeEnd{}, unexpected(f)
		}
		if err != nil {
			return CodeEnd{}, err
		}
	}
}

func writeTo(w io.Writer, p []byte, name string) error {
	if w == nil {
		return nil
	}
	if _, err := w.Write(p); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// codeEvents reassembles the JSON lines carried in D frames.
type codeEvents struct {
	buf      []byte
	onResult func(api.CodeOutput) error
}

func (e *codeEvents) write(p []byte) error {
	e.buf = append(e.buf, p...)
	for {
		i := bytes.IndexByte(e.buf, '\n')
		if i < 0 {
			if len(e.buf) > MaxCodeEvent {
				return fmt.Errorf("agentproto: code event exceeds %d bytes", MaxCodeEvent)
			}
			return nil
		}
		line := e.buf[:i]
		e.buf = e.buf[i+1:]
		var ev CodeEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return fmt.Errorf("agentproto: decode code event: %w", err)
		}
		if ev.Type != "result" || e.onResult == nil {
			continue // unknown types are skipped, for forward compatibility
		}
		var out api.CodeOutput
		// The driver's bundle is the interpreter's word: a malformed one
		// (not base64 where bytes belong) is dropped, not fatal.
		if json.Unmarshal(ev.Result, &out) != nil {
			continue
		}
		out.IsMainResult = ev.Main
		if err := e.onResult(out); err != nil {
			return err
		}
	}
}
