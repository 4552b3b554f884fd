package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/airlockdev/airlock/internal/agentproto"
)

// startPTY starts a background process on a new pseudo-terminal, as the
// leader of its own session with the terminal as its controlling tty. An
// empty argv starts the user's login shell.
func (a *Agent) startPTY(req agentproto.ProcRequest) (*bgProc, error) {
	if err := checkSize(req.PTY.Cols, req.PTY.Rows); err != nil {
		return nil, err
	}
	argv := req.Argv
	if len(argv) == 0 {
		acct, err := a.account(req.User)
		if err != nil {
			return nil, err
		}
		argv = loginShell(acct)
	}
	// TERM first so the request's env can override it.
	spec, err := a.resolveExec(argv, req.User, append([]string{"TERM=xterm-256color"}, req.Env...), req.Cwd)
	if err != nil {
		return nil, err
	}
	master, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open pty: %w", err)
	}
	defer tty.Close()
	if master, err = pollable(master); err != nil {
		return nil, err
	}
	if err := setWinsize(master, req.PTY.Cols, req.PTY.Rows); err != nil {
		master.Close()
		return nil, err
	}
	if os.Geteuid() == 0 {
		// Like login(1): the user owns their terminal, so programs that
		// reopen it (tty, ssh, editors) can.
		_ = tty.Chown(int(spec.acct.UID), int(spec.acct.GID))
		_ = tty.Chmod(0o620)
	}
	// Under the exec shim like every command, leading a new session with
	// the terminal as its controlling tty.
	sp, err := a.spawn(spec, [3]*os.File{tty, tty, tty}, spawnOpts{Setsid: true, Setctty: true})
	if err != nil {
		master.Close()
		return nil, startError(spec.argv[0], err)
	}
	p := newBgProc(sp.pid, sp, req.Tag, spec.argv, master)
	p.pty = true
	p.resizePTY = func(cols, rows int) error { return setWinsize(master, cols, rows) }
	go p.watchPTY(master, sp.exited)
	return p, nil
}

// watchPTY collects a terminal's output until its process exits. Output
// still buffered is read for up to outputGrace; a background job that
// keeps the terminal open does not hold the process's exit back.
func (p *bgProc) watchPTY(master *os.File, exited <-chan unix.WaitStatus) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, agentproto.ChunkSize)
		for {
			n, err := master.Read(buf)
			if n > 0 {
				p.out.write(agentproto.FrameStdout, buf[:n])
			}
			if err != nil {
				return // EIO once no process has the terminal open
			}
		}
	}()
	ws := <-exited
	p.run.exit()
	select {
	case <-done:
	case <-time.After(outputGrace):
		_ = master.SetReadDeadline(time.Now())
		<-done
	}
	master.Close()
	p.finish(ws)
}

// loginShell picks the user's shell from passwd, else bash, else sh.
func loginShell(acct *account) []string {
	for _, sh := range []string{acct.Shell, "/bin/bash", "/bin/sh"} {
		if !filepath.IsAbs(sh) {
			continue
		}
		if base := filepath.Base(sh); base == "false" || base == "nologin" {
			continue
		}
		if fi, err := os.Stat(sh); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return []string{sh, "-l"}
		}
	}
	return []string{"/bin/sh", "-l"}
}

// pollable returns the master as a non-blocking, poller-backed file, so
// that a read can be cut off with a deadline. (pty.Open hands it out in
// blocking mode, where nothing interrupts a pending read.)
func pollable(master *os.File) (*os.File, error) {
	defer master.Close()
	fd, err := unix.FcntlInt(master.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dup pty master: %w", err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("pty master: %w", err)
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), nil
}

// setWinsize sets the terminal size; the kernel signals SIGWINCH to the
// terminal's foreground process group. It goes through the raw conn
// because File.Fd would put the master back in blocking mode.
func setWinsize(master *os.File, cols, rows int) error {
	rc, err := master.SyscallConn()
	if err != nil {
		return fmt.Errorf("resize pty: %w", err)
	}
	var ioErr error
	err = rc.Control(func(fd uintptr) {
		ioErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: uint16(cols), Row: uint16(rows)})
	})
	if err == nil {
		err = ioErr
	}
	if err != nil {
		return fmt.Errorf("resize pty: %w", err)
	}
	return nil
}
