package sandbox

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/agentproto"
)

// ExecIO receives an exec's output as it is produced.
type ExecIO struct {
	Stdout  io.Writer
	Stderr  io.Writer
	OnStart func(pid int)
	// OnSandbox, if set, is told the id of the sandbox a Run created.
	OnSandbox func(id string)
}

// Exec runs a command in a sandbox through its agent.
func (m *Manager) Exec(ctx context.Context, id string, req api.ExecRequest, eio ExecIO) (agentproto.ExitStatus, error) {
	sb, err := m.Get(ctx, id)
	if err != nil {
		return agentproto.ExitStatus{}, err
	}
	areq, err := m.execRequest(sb, req)
	if err != nil {
		return agentproto.ExitStatus{}, err
	}
	c, err := m.Agent(ctx, id)
	if err != nil {
		return agentproto.ExitStatus{}, err
	}
	pio := agentproto.ExecIO{Stdout: eio.Stdout, Stderr: eio.Stderr, OnStart: eio.OnStart}
	if req.Stdin != nil {
		pio.Stdin = bytesReader(req.Stdin)
	}
	lw := m.watchLimits(sb)
	st, err := c.Exec(ctx, areq, pio)
	return lw.note(ctx, m, st, err)
}

func (m *Manager) execRequest(sb api.Sandbox, req api.ExecRequest) (agentproto.Request, error) {
	var argv []string
	switch {
	case len(req.Cmd) > 0 && req.Shell != "":
		return agentproto.Request{}, invalid("set either cmd or shell, not both")
	case len(req.Cmd) > 0:
		if req.Cmd[0] == "" {
			return agentproto.Request{}, invalid("cmd[0] is empty")
		}
		argv = req.Cmd
	case req.Shell != "":
		argv = []string{"/bin/sh", "-c", req.Shell}
	default:
		return agentproto.Request{}, invalid("one of cmd or shell is required")
	}
	if req.TimeoutSeconds < 0 {
		return agentproto.Request{}, invalid("timeout_seconds must not be negative, got %g", req.TimeoutSeconds)
	}
	timeout := time.Duration(req.TimeoutSeconds * float64(time.Second))
	if timeout == 0 {
		timeout = m.cfg.DefaultExecTimeout
	}
	if timeout > m.cfg.MaxTimeout {
		return agentproto.Request{}, invalid("timeout_seconds must be at most %d", int64(m.cfg.MaxTimeout/time.Second))
	}
	if req.Cwd != "" && req.Cwd[0] != '/' {
		return agentproto.Request{}, invalid("cwd must be an absolute path, got %q", req.Cwd)
	}
	env := map[string]string{}
	maps.Copy(env, sb.Env)
	for k, v := range req.Env {
		if !envKeyRE.MatchString(k) {
			return agentproto.Request{}, invalid("env name %q is not a valid variable name", k)
		}
		env[k] = v
	}
	var envList []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		envList = append(envList, k+"="+env[k])
	}
	return agentproto.Request{
		Argv: argv, Env: envList, Cwd: req.Cwd, User: req.User,
		TimeoutMS: timeout.Milliseconds(),
	}, nil
}

// OutputLimit returns the per-stream cap for a buffered exec.
func (m *Manager) OutputLimit(req api.ExecRequest) (int64, error) {
	switch {
	case req.MaxOutputBytes < 0:
		return 0, invalid("max_output_bytes must not be negative")
	case req.MaxOutputBytes == 0:
		return m.cfg.DefaultOutputBytes, nil
	case req.MaxOutputBytes > m.cfg.MaxOutputBytes:
		return 0, invalid("max_output_bytes must be at most %d, got %d", m.cfg.MaxOutputBytes, req.MaxOutputBytes)
	}
	return req.MaxOutputBytes, nil
}

// Run creates a sandbox, runs one command in it and deletes it.
func (m *Manager) Run(ctx context.Context, req api.RunRequest, eio ExecIO) (string, agentproto.ExitStatus, error) {
	// The sandbox must outlive the command it was made for.
	if req.Sandbox.TimeoutSeconds == 0 {
		execTimeout := time.Duration(req.Exec.TimeoutSeconds * float64(time.Second))
		if execTimeout <= 0 {
			execTimeout = m.cfg.DefaultExecTimeout
		}
		if ttl := execTimeout + time.Minute; ttl > m.cfg.DefaultTimeout {
			req.Sandbox.TimeoutSeconds = int64(ttl / time.Second)
		}
	}
	sb, err := m.Create(ctx, req.Sandbox)
	if err != nil {
		return "", agentproto.ExitStatus{}, err
	}
	if eio.OnSandbox != nil {
		eio.OnSandbox(sb.ID)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := m.Delete(dctx, sb.ID); err != nil {
			m.log.Error("delete one-shot sandbox", "id", sb.ID, "err", err)
		}
	}()
	st, err := m.Exec(ctx, sb.ID, req.Exec, eio)
	if err != nil {
		return sb.ID, st, fmt.Errorf("run in %s: %w", sb.ID, err)
	}
	return sb.ID, st, nil
}
