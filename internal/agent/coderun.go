package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/agentproto"
)

// Interrupting a run escalates: SIGINT to the interpreter (a Python
// KeyboardInterrupt, node's breakOnSigint; bash gets it as a group from
// the start, see language.groupInterrupt), then SIGINT to its whole
// process group (foreground subprocesses), then killing it, losing the
// context's state.
const (
	interruptGroupAfter = time.Second
	interruptKillAfter  = 2 * time.Second
	// runFlushTimeout bounds forwarding what the code left in its output
	// pipes once the run is over.
	runFlushTimeout = 200 * time.Millisecond
	// deathGrace is how long the events of a dead interpreter are still
	// read for output it wrote before dying.
	deathGrace = 100 * time.Millisecond
)

// execute runs one command in ip and streams its output on w. Ending ctx
// interrupts the run like a timeout, without reporting one.
func (c *codeContext) execute(ctx context.Context, ip *interp, w *frameWriter, cmd []byte, timeoutMS int64) agentproto.CodeEnd {
	end := agentproto.CodeEnd{ExecutionCount: c.nextCount(ip)}
	sink := func(typ byte) func([]byte) {
		return func(b []byte) { _ = w.frame(typ, b) }
	}
	ip.stdout.setSink(sink(agentproto.FrameStdout))
	ip.stderr.setSink(sink(agentproto.FrameStderr))
	flushed := false
	flushOutput := func() {
		if !flushed {
			flushed = true
			ip.stdout.flush(runFlushTimeout)
			ip.stderr.flush(runFlushTimeout)
			ip.stdout.setSink(nil)
			ip.stderr.setSink(nil)
		}
	}
	defer flushOutput()

	var timeout <-chan time.Time
	if timeoutMS > 0 && timeoutMS < maxTimeoutMS {
		t := time.NewTimer(time.Duration(timeoutMS) * time.Millisecond)
		defer t.Stop()
		timeout = t.C
	}
	var escalate <-chan time.Time
	stage := 0
	interrupt := func() {
		if stage > 0 {
			return
		}
		stage = 1
		ip.interrupt(ip.lang.groupInterrupt)
		escalate = time.After(interruptGroupAfter)
	}
	var status *int
	lost := false
	done := ctx.Done()
	if err := ip.send(cmd); err != nil {
		lost = true // the driver is gone; exited tells how
	}
loop:
	for !lost {
		select {
		case ev, ok := <-ip.events:
			if !ok {
				lost = true
				break loop
			}
			if ev.dropped > 0 {
				_ = w.frame(agentproto.FrameStderr, fmt.Appendf(nil,
					"airlock: an output of %d bytes was dropped (limit %d)\n", ev.dropped, agentproto.MaxCodeEvent))
			}
			switch ev.Type {
			case "stdout":
				_ = w.frame(agentproto.FrameStdout, ev.Data)
			case "stderr":
				_ = w.frame(agentproto.FrameStderr, ev.Data)
			case "result":
				sendCodeEvent(w, agentproto.CodeEvent{Type: "result", Result: ev.Result, Main: ev.Main})
			case "error":
				end.Error = ev.Error
			case "end":
				status = ev.Status
				break loop
			}
		case <-ip.exited:
			lost = true
		case <-timeout:
			timeout, end.TimedOut = nil, true
			interrupt()
		case <-done:
			done = nil
			interrupt()
		case <-escalate:
			stage++
			if stage == 2 {
				ip.interrupt(true)
				escalate = time.After(interruptKillAfter)
			} else {
				escalate = nil
				ip.kill()
			}
		}
	}
	if lost {
		c.forwardLast(ip, w)
		flushOutput() // before lost() closes the pipes
		end.ContextLost = true
		end.Error = &api.CodeError{
			Name: api.CodeErrorContextDied,
			Value: fmt.Sprintf("the %s interpreter %s; the context's state is lost and the next run starts a fresh one",
				ip.lang.name, describeDeath(ip)),
		}
		c.lost(ip)
	}
	switch {
	case end.TimedOut:
		e := &api.CodeError{Name: api.CodeErrorTimeout,
			Value: fmt.Sprintf("execution timed out after %s", time.Duration(timeoutMS)*time.Millisecond)}
		if lost {
			e.Value += "; the interpreter did not stop when interrupted and was killed, losing the context's state"
		} else if end.Error != nil {
			e.Traceback = end.Error.Traceback // where the code was
		}
		end.Error = e
	case end.Error == nil && status != nil && *status != 0:
		end.Error = &api.CodeError{Name: api.CodeErrorExitStatus, Value: fmt.Sprintf("exit status %d", *status)}
	}
	return end
}

// forwardLast passes on the output a dead interpreter's driver sent before
// it died.
func (c *codeContext) forwardLast(ip *interp, w *frameWriter) {
	select {
	case <-ip.exited:
	case <-time.After(stopTimeout):
		ip.kill() // closed its socket yet lives on: not a driver any more
	}
	deadline := time.After(deathGrace)
	for {
		select {
		case ev, ok := <-ip.events:
			if !ok {
				return
			}
			switch ev.Type {
			case "stdout":
				_ = w.frame(agentproto.FrameStdout, ev.Data)
			case "stderr":
				_ = w.frame(agentproto.FrameStderr, ev.Data)
			}
		case <-deadline:
			return
		}
	}
}

func describeDeath(ip *interp) string {
	select {
	case <-ip.exited:
		return "exited (" + describeExit(ip.exitStatus()) + ")"
	default:
		return "stopped responding"
	}
}

// sendCodeEvent writes ev as a JSON line in D frames, split to fit.
func sendCodeEvent(w *frameWriter, ev agentproto.CodeEvent) {
	b, err := json.Marshal(ev)
	if err != nil {
		return // the driver's bundle was not JSON: nothing to show
	}
	b = append(b, '\n')
	for len(b) > 0 {
		n := min(len(b), agentproto.ChunkSize)
		if w.frame(agentproto.FrameData, b[:n]) != nil {
			return
		}
		b = b[n:]
	}
}
