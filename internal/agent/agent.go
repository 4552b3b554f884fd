// Package agent is the sandbox side of the agent protocol
// (docs/AGENT_PROTOCOL.md): airlock-agent runs it as PID 1 inside every
// sandbox to execute commands and manage files for the daemon.
//
// The package reaps every child of the process (see reaper), so a program
// embedding it must not start and wait for children by other means, such
// as os/exec.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// Config configures an Agent. Zero fields take the documented defaults.
type Config struct {
	// DefaultUser runs execs and owns created files when a request names
	// no user. Default "user", the template's uid 1000.
	DefaultUser string
	// Hostname is reported in hello. Default os.Hostname().
	Hostname string
	// Logger receives one line per unexpected condition. Default: discard.
	Logger *log.Logger
	// PasswdFile and GroupFile resolve users. Default /etc/passwd and
	// /etc/group.
	PasswdFile string
	GroupFile  string
	// ShimBinary is the executable started as every command's exec shim
	// (see shim.go): a binary whose main calls RunShimIfRequested. Default
	// os.Executable(), the agent itself.
	ShimBinary string
	// NprocLimit, if set, is the RLIMIT_NPROC of every exec: the most
	// processes and threads a user's execs may have. The driver sets it
	// under gVisor, whose kernel enforces it per sandbox, where running
	// into the host's pids cgroup would kill the whole sandbox.
	NprocLimit uint64
}

// Agent serves protocol connections. It is safe for concurrent use; one
// Agent may serve successive connections as the daemon comes and goes.
type Agent struct {
	cfg    Config
	reaper *reaper
	procs  *procTable // background processes, across connections
	code   *codeContexts
}

// requestTimeout bounds how long a new stream may take to send its
// request, so a half-opened stream cannot pin a goroutine.
const requestTimeout = 30 * time.Second

// New returns an Agent and starts the process-wide child reaper, which as
// PID 1 must run even before the first exec.
func New(cfg Config) *Agent {
	if cfg.DefaultUser == "" {
		cfg.DefaultUser = "user"
	}
	if cfg.Hostname == "" {
		cfg.Hostname, _ = os.Hostname()
	}
	if cfg.Logger == nil {
		cfg.Logger = log.New(io.Discard, "", 0)
	}
	if cfg.PasswdFile == "" {
		cfg.PasswdFile = "/etc/passwd"
	}
	if cfg.GroupFile == "" {
		cfg.GroupFile = "/etc/group"
	}
	if cfg.ShimBinary == "" {
		cfg.ShimBinary, _ = os.Executable()
	}
	return &Agent{cfg: cfg, reaper: getReaper(), procs: newProcTable(), code: newCodeContexts()}
}

// Serve runs the agent side of the protocol over conn until the connection
// or ctx ends. Operations run concurrently, one per stream. Serve does not
// wait for them: a process stuck in the kernel must not stop the agent from
// redialing. Their streams are closed with the session, which kills any
// exec still running.
func Serve(ctx context.Context, conn net.Conn, a *Agent) error {
	sess, err := yamux.Server(conn, agentproto.MuxConfig())
	if err != nil {
		return fmt.Errorf("start mux: %w", err)
	}
	defer sess.Close()
	// Operations get a context that also ends with the session.
	opCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(opCtx, func() { sess.Close() })
	defer stop()
	go func() {
		select {
		case <-sess.CloseChan():
			cancel()
		case <-opCtx.Done():
		}
	}()
	for {
		s, err := sess.AcceptStreamWithContext(opCtx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("session ended: %w", err)
		}
		go a.serveStream(opCtx, s)
	}
}

// serveStream reads a stream's request and runs the operation. A panic
// is contained here: the agent is PID 1, and its death takes the whole
// sandbox down.
func (a *Agent) serveStream(ctx context.Context, s *yamux.Stream) {
	defer s.Close()
	defer func() {
		if v := recover(); v != nil {
			a.cfg.Logger.Printf("panic serving stream %d: %v\n%s", s.StreamID(), v, debug.Stack())
		}
	}()
	w := &frameWriter{w: s}
	_ = s.SetReadDeadline(time.Now().Add(requestTimeout))
	f, err := agentproto.ReadFrame(s)
	_ = s.SetReadDeadline(time.Time{})
	if err != nil {
		return
	}
	if f.Type != agentproto.FrameRequest {
		w.fail(fmt.Errorf("expected request frame, got %q: %w", f.Type, errdefs.ErrInvalidArgument))
		return
	}
	var req agentproto.Request
	if err := f.Decode(&req); err != nil {
		w.fail(fmt.Errorf("%w: %w", err, errdefs.ErrInvalidArgument))
		return
	}
	switch req.Op {
	case agentproto.OpHello:
		w.reply(agentproto.Reply{Version: agentproto.Version, AgentPID: os.Getpid(), Hostname: a.cfg.Hostname})
	case agentproto.OpExec:
		a.exec(ctx, s, w, req)
	case agentproto.OpProcStart, agentproto.OpProcList, agentproto.OpProcAttach, agentproto.OpProcInput,
		agentproto.OpProcCloseStdin, agentproto.OpProcSignal, agentproto.OpProcKill, agentproto.OpProcResize:
		a.serveProc(ctx, s, w, f.Payload)
	case agentproto.OpRead:
		a.readFile(s, w, req)
	case agentproto.OpWrite:
		a.writeFile(s, w, req)
	case agentproto.OpTarRead:
		a.tarRead(ctx, s, w, f.Payload)
	case agentproto.OpTarWrite:
		a.tarWrite(ctx, s, w, f.Payload)
	case agentproto.OpContextCreate, agentproto.OpContextList, agentproto.OpContextRestart,
		agentproto.OpContextDelete, agentproto.OpCodeRun:
		a.serveCode(ctx, s, w, f.Payload)
	case agentproto.OpWatch:
		a.watch(ctx, s, w, f.Payload)
	case agentproto.OpStat, agentproto.OpList, agentproto.OpMkdir, agentproto.OpRemove, agentproto.OpRename:
		rep, err := a.fileOp(req)
		if err != nil {
			w.fail(err)
			return
		}
		w.reply(rep)
	default:
		w.fail(fmt.Errorf("unknown op %q: %w", req.Op, errdefs.ErrInvalidArgument))
	}
}

// frameWriter serializes frames onto a stream written from several
// goroutines (an exec's stdout and stderr pumps and its final reply).
type frameWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (fw *frameWriter) frame(typ byte, payload []byte) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return agentproto.WriteFrame(fw.w, typ, payload)
}

// reply sends rep. A reply too large for a frame (a huge listing) is
// turned into an error reply rather than dropped.
func (fw *frameWriter) reply(rep agentproto.Reply) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	err := agentproto.WriteJSON(fw.w, agentproto.FrameReply, rep)
	if errors.Is(err, agentproto.ErrFrameTooLarge) {
		err = agentproto.WriteJSON(fw.w, agentproto.FrameReply, agentproto.Reply{
			Error: agentproto.ToWire(fmt.Errorf("reply exceeds %d bytes: %w", agentproto.MaxFrame, errdefs.ErrResourceExhausted)),
		})
	}
	return err
}

// replyJSON sends any JSON reply, for operations with their own reply type.
// Such types should embed or carry `Error *agentproto.WireError` so that
// fail's replies decode into them too.
func (fw *frameWriter) replyJSON(v any) error {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return agentproto.WriteJSON(fw.w, agentproto.FrameReply, v)
}

// fail sends err as an error reply.
func (fw *frameWriter) fail(err error) error {
	return fw.reply(agentproto.Reply{Error: agentproto.ToWire(err)})
}
