package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
)

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// process is a started exec: its pid, its status channel from the reaper
// and the agent's ends of its stdio pipes.
type process struct {
	pid    int
	tree   *spawned // its shim: tree.kill() kills all the command started
	exited <-chan unix.WaitStatus
	stdin  *os.File // nil unless the request asked for stdin
	stdout *os.File
	stderr *os.File
}

// execSpec is a resolved command: what to run, as whom, where.
type execSpec struct {
	acct  *account
	argv0 string // the executable's path
	argv  []string
	env   []string
	cwd   string
}

// resolveExec resolves everything a request names: user, env (layered
// over the defaults), cwd and executable.
func (a *Agent) resolveExec(argv []string, user string, extraEnv []string, cwd string) (*execSpec, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, fmt.Errorf("exec: empty argv: %w", errdefs.ErrInvalidArgument)
	}
	acct, err := a.account(user)
	if err != nil {
		return nil, err
	}
	env, err := execEnv(acct, extraEnv)
	if err != nil {
		return nil, err
	}
	dir, err := execDir(acct, cwd)
	if err != nil {
		return nil, err
	}
	argv0, err := lookPath(argv[0], envValue(env, "PATH"), dir)
	if err != nil {
		return nil, err
	}
	return &execSpec{acct: acct, argv0: argv0, argv: argv, env: env, cwd: dir}, nil
}

// startProcess resolves everything an exec request names and starts it in
// its own process group.
func (a *Agent) startProcess(req agentproto.Request) (*process, error) {
	spec, err := a.resolveExec(req.Argv, req.User, req.Env, req.Cwd)
	if err != nil {
		return nil, err
	}

	var p process
	var childEnds []*os.File
	defer func() {
		for _, f := range childEnds {
			f.Close()
		}
	}()
	fail := func(err error) (*process, error) {
		p.closeParentEnds()
		return nil, err
	}
	var stdin *os.File
	if req.Stdin {
		if stdin, p.stdin, err = os.Pipe(); err != nil {
			return fail(fmt.Errorf("exec: stdin pipe: %w", err))
		}
	} else if stdin, err = os.Open(os.DevNull); err != nil {
		return fail(fmt.Errorf("exec: open %s: %w", os.DevNull, err))
	}
	childEnds = append(childEnds, stdin)
	stdoutW, stderrW, err := p.outputPipes()
	if err != nil {
		return fail(err)
	}
	childEnds = append(childEnds, stdoutW, stderrW)

	// Under a shim (shim.go), in its own process group, so signals reach
	// the command and its jobs without touching the agent, and the final
	// kill reaches everything it started.
	sp, err := a.spawn(spec, [3]*os.File{stdin, stdoutW, stderrW}, spawnOpts{})
	if err != nil {
		return fail(startError(req.Argv[0], err))
	}
	p.pid, p.tree, p.exited = sp.pid, sp, sp.exited
	return &p, nil
}

func (p *process) outputPipes() (stdoutW, stderrW *os.File, err error) {
	if p.stdout, stdoutW, err = os.Pipe(); err != nil {
		return nil, nil, fmt.Errorf("exec: stdout pipe: %w", err)
	}
	if p.stderr, stderrW, err = os.Pipe(); err != nil {
		stdoutW.Close()
		return nil, nil, fmt.Errorf("exec: stderr pipe: %w", err)
	}
	return stdoutW, stderrW, nil
}

func (p *process) closeParentEnds() {
	for _, f := range []*os.File{p.stdin, p.stdout, p.stderr} {
		if f != nil {
			f.Close()
		}
	}
}

// account resolves the user a request names, or the default user.
func (a *Agent) account(name string) (*account, error) {
	if name == "" {
		name = a.cfg.DefaultUser
	}
	return lookupAccount(a.cfg.PasswdFile, a.cfg.GroupFile, name)
}

// execEnv layers the request's KEY=VALUE entries over the defaults.
func execEnv(acct *account, extra []string) ([]string, error) {
	env := []string{
		"PATH=" + defaultPath,
		"HOME=" + acct.Home,
		"USER=" + acct.Name,
		"LOGNAME=" + acct.Name,
		"LANG=C.UTF-8",
	}
	index := map[string]int{}
	for i, kv := range env {
		index[kv[:strings.IndexByte(kv, '=')]] = i
	}
	for _, kv := range extra {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsRune(kv, 0) {
			return nil, fmt.Errorf("exec: env entry %q is not KEY=VALUE: %w", kv, errdefs.ErrInvalidArgument)
		}
		if i, ok := index[k]; ok {
			env[i] = kv
			continue
		}
		index[k] = len(env)
		env = append(env, kv)
	}
	return env, nil
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// execDir validates the requested working directory, or picks the user's
// home, falling back to "/" for accounts whose home does not exist (system
// users, numeric uids).
func execDir(acct *account, cwd string) (string, error) {
	if cwd == "" {
		if fi, err := os.Stat(acct.Home); err == nil && fi.IsDir() && filepath.IsAbs(acct.Home) {
			return acct.Home, nil
		}
		return "/", nil
	}
	if !filepath.IsAbs(cwd) {
		return "", fmt.Errorf("exec: cwd %q is not absolute: %w", cwd, errdefs.ErrInvalidArgument)
	}
	fi, err := os.Stat(cwd)
	if err != nil {
		return "", pathError("exec: cwd", cwd, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("exec: cwd %s: not a directory: %w", cwd, errdefs.ErrInvalidArgument)
	}
	return filepath.Clean(cwd), nil
}

// lookPath finds name in path (the exec's own PATH, not the agent's) when
// it has no slash. Relative PATH entries are taken relative to the exec's
// cwd, where the shell would resolve them.
func lookPath(name, path, cwd string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(cwd, dir)
		}
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec: %q: executable file not found in PATH: %w", name, errdefs.ErrNotFound)
}

// startError classifies a fork/exec failure.
func startError(name string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("exec %s: %w", name, errdefs.ErrNotFound)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM),
		errors.Is(err, syscall.ENOEXEC), errors.Is(err, syscall.ENOTDIR),
		errors.Is(err, syscall.EISDIR):
		return &kindError{msg: fmt.Sprintf("exec %s: %v", name, err), kind: errdefs.ErrInvalidArgument}
	case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.ENOMEM):
		return &kindError{msg: fmt.Sprintf("exec %s: %v", name, err), kind: errdefs.ErrResourceExhausted}
	}
	return fmt.Errorf("exec %s: %w", name, err)
}
