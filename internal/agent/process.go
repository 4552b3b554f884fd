package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sync"

	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// serveProc runs the proc_* operations on background processes.
func (a *Agent) serveProc(ctx context.Context, s io.ReadWriteCloser, w *frameWriter, payload []byte) {
	var req agentproto.ProcRequest
	if err := json.Unmarshal(payload, &req); err != nil {
		w.fail(fmt.Errorf("decode %s request: %v: %w", req.Op, err, errdefs.ErrInvalidArgument))
		return
	}
	reply := func(p agentproto.ProcReply, err error) {
		if err != nil {
			w.fail(err)
			return
		}
		w.replyJSON(p)
	}
	switch req.Op {
	case agentproto.OpProcStart:
		p, err := a.startBackground(req)
		if err != nil {
			w.fail(err)
			return
		}
		info := p.info()
		w.replyJSON(agentproto.ProcReply{Process: &info})
	case agentproto.OpProcList:
		w.replyJSON(agentproto.ProcReply{Processes: a.procs.list()})
	case agentproto.OpProcAttach:
		a.attach(ctx, s, w, req)
	case agentproto.OpProcInput:
		a.procInput(s, w, req)
	case agentproto.OpProcCloseStdin:
		reply(agentproto.ProcReply{}, a.withProc(req, (*bgProc).requestCloseStdin))
	case agentproto.OpProcSignal:
		reply(agentproto.ProcReply{}, a.withProc(req, func(p *bgProc) error { return p.signal(req.Signal) }))
	case agentproto.OpProcResize:
		reply(agentproto.ProcReply{}, a.withProc(req, func(p *bgProc) error { return p.resize(req.Cols, req.Rows) }))
	case agentproto.OpProcKill:
		var info agentproto.ProcInfo
		err := a.withProc(req, func(p *bgProc) error {
			info = p.kill()
			return nil
		})
		reply(agentproto.ProcReply{Process: &info}, err)
	default:
		w.fail(fmt.Errorf("unknown op %q: %w", req.Op, errdefs.ErrInvalidArgument))
	}
}

func (a *Agent) withProc(req agentproto.ProcRequest, fn func(*bgProc) error) error {
	p, err := a.procs.get(req.PID, req.Tag)
	if err != nil {
		return err
	}
	return fn(p)
}

// tagRE is what a tag may look like. Tags are never all digits, so that
// "pid or tag" selectors are unambiguous.
var (
	tagRE    = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)
	digitsRE = regexp.MustCompile(`^[0-9]+$`)
)

// validTag checks a tag for a new process ("" is no tag).
func validTag(tag string) error {
	if tag == "" || (tagRE.MatchString(tag) && !digitsRE.MatchString(tag)) {
		return nil
	}
	return fmt.Errorf("tag %q must be 1-64 letters, digits, '_', '.' or '-', start with a letter, digit or '_', and not be all digits: %w", tag, errdefs.ErrInvalidArgument)
}

// startBackground starts a process that outlives the request, on pipes
// or a terminal, and registers it in the table.
func (a *Agent) startBackground(req agentproto.ProcRequest) (*bgProc, error) {
	if err := validTag(req.Tag); err != nil {
		return nil, err
	}
	if req.PTY != nil && req.Stdin {
		return nil, fmt.Errorf("stdin does not apply to a terminal, which always takes input: %w", errdefs.ErrInvalidArgument)
	}
	return a.procs.start(req.Tag, func() (*bgProc, error) {
		if req.PTY != nil {
			return a.startPTY(req)
		}
		proc, err := a.startProcess(agentproto.Request{Argv: req.Argv, Env: req.Env, Cwd: req.Cwd, User: req.User, Stdin: req.Stdin})
		if err != nil {
			return nil, err
		}
		p := newBgProc(proc.pid, proc.tree, req.Tag, req.Argv, proc.stdin)
		go p.watchPipes(proc)
		return p, nil
	})
}

// watchPipes collects the output of a pipe-backed process until it exits.
func (p *bgProc) watchPipes(proc *process) {
	var pumps sync.WaitGroup
	pumps.Add(2)
	go logPump(&pumps, proc.stdout, p.out, agentproto.FrameStdout)
	go logPump(&pumps, proc.stderr, p.out, agentproto.FrameStderr)
	ws := <-proc.exited
	p.run.exit()
	drainOutput(&pumps, proc.stdout, proc.stderr)
	p.finish(ws)
}

// logPump copies one output of a process into its log until it ends.
func logPump(wg *sync.WaitGroup, r *os.File, out *outputLog, typ byte) {
	defer wg.Done()
	buf := make([]byte, agentproto.ChunkSize)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			out.write(typ, buf[:n])
		}
		if err != nil {
			return // EOF, EIO from a terminal whose last user left, or cut off
		}
	}
}

// procInput writes the stream's data frames to a process's stdin until
// the EOF frame, which ends this request's input (not the process's
// stdin), and replies with the byte count.
func (a *Agent) procInput(s io.Reader, w *frameWriter, req agentproto.ProcRequest) {
	p, err := a.procs.get(req.PID, req.Tag)
	if err == nil {
		err = p.inputOpen()
	}
	if err != nil {
		w.fail(err)
		return
	}
	if w.replyJSON(agentproto.ProcReply{}) != nil {
		return
	}
	var n int64
	for {
		f, err := agentproto.ReadFrame(s)
		if err != nil {
			return // the daemon went away
		}
		switch f.Type {
		case agentproto.FrameData:
			if err := p.writeInput(f.Payload); err != nil {
				w.fail(err)
				return
			}
			n += int64(len(f.Payload))
		case agentproto.FrameEOF:
			w.replyJSON(agentproto.ProcReply{Size: n})
			return
		}
	}
}
