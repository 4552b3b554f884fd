package sandbox

import (
	"context"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/agentproto"
)

// Default terminal size of a PTY process.
const (
	defaultCols = 80
	defaultRows = 24
)

// StartProcess starts a background process in a sandbox, with the same
// validation and environment as Exec. The process has no timeout: it
// lives until it exits, is killed, or the sandbox goes.
func (m *Manager) StartProcess(ctx context.Context, id string, req api.StartProcessRequest) (agentproto.ProcInfo, error) {
	sb, err := m.Get(ctx, id)
	if err != nil {
		return agentproto.ProcInfo{}, err
	}
	if req.PTY != nil && req.Stdin {
		return agentproto.ProcInfo{}, invalid("stdin does not apply with pty: a terminal always takes input")
	}
	if req.PTY != nil && (req.PTY.Cols < 0 || req.PTY.Rows < 0) {
		return agentproto.ProcInfo{}, invalid("pty cols and rows must not be negative, got %dx%d", req.PTY.Cols, req.PTY.Rows)
	}
	ereq := api.ExecRequest{Cmd: req.Cmd, Shell: req.Shell, Env: req.Env, Cwd: req.Cwd, User: req.User}
	// A terminal without a command runs the user's login shell, which
	// only the agent can look up; the placeholder passes validation.
	loginShell := req.PTY != nil && len(req.Cmd) == 0 && req.Shell == ""
	if loginShell {
		ereq.Cmd = []string{"login-shell"}
	}
	areq, err := m.execRequest(sb, ereq)
	if err != nil {
		return agentproto.ProcInfo{}, err
	}
	preq := agentproto.ProcRequest{
		Argv: areq.Argv, Env: areq.Env, Cwd: areq.Cwd, User: areq.User,
		Tag: req.Tag, Stdin: req.Stdin,
	}
	if loginShell {
		preq.Argv = nil
	}
	if req.PTY != nil {
		preq.PTY = &agentproto.PTYSize{Cols: req.PTY.Cols, Rows: req.PTY.Rows}
		if preq.PTY.Cols == 0 {
			preq.PTY.Cols = defaultCols
		}
		if preq.PTY.Rows == 0 {
			preq.PTY.Rows = defaultRows
		}
	}
	c, err := m.Agent(ctx, id)
	if err != nil {
		return agentproto.ProcInfo{}, err
	}
	return c.StartProcess(ctx, preq)
}
