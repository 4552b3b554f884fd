package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// maxContexts bounds the code contexts of a sandbox: each is a live
// interpreter holding memory.
const maxContexts = 64

// codeContexts is the agent's table of code contexts. Contexts outlive
// the daemon connection that created them, like background processes.
type codeContexts struct {
	mu   sync.Mutex
	byID map[string]*codeContext
}

func newCodeContexts() *codeContexts {
	return &codeContexts{byID: map[string]*codeContext{}}
}

// contextSettings is what a context's interpreters are started with.
type contextSettings struct {
	lang *language
	user string
	cwd  string
	env  []string
}

// codeContext is a context: settings, and the current interpreter if any.
type codeContext struct {
	id       string
	dflt     bool
	settings contextSettings
	created  time.Time
	// slot is held by the run in progress: runs of a context queue.
	slot chan struct{}

	mu      sync.Mutex
	ip      *interp // nil before the first start and after a death
	died    bool    // the last interpreter died: the next start says so
	count   int     // runs of the current interpreter
	acct    string  // resolved user name
	dir     string  // resolved cwd
	deleted bool
}

func defaultContextID(lang string) string { return "default-" + lang }

func newContextID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "ctx-" + hex.EncodeToString(b)
}

// create makes a context and starts its interpreter.
func (t *codeContexts) create(a *Agent, id string, dflt bool, set contextSettings) (*codeContext, error) {
	t.mu.Lock()
	if _, ok := t.byID[id]; ok {
		t.mu.Unlock()
		return nil, fmt.Errorf("code: context %s exists: %w", id, errdefs.ErrConflict)
	}
	if len(t.byID) >= maxContexts {
		t.mu.Unlock()
		return nil, fmt.Errorf("code: a sandbox has at most %d contexts: %w", maxContexts, errdefs.ErrResourceExhausted)
	}
	c := &codeContext{id: id, dflt: dflt, settings: set, created: time.Now().UTC(), slot: make(chan struct{}, 1)}
	t.byID[id] = c
	t.mu.Unlock()
	c.mu.Lock()
	_, _, err := c.startLocked(a)
	c.mu.Unlock()
	if err != nil {
		t.mu.Lock()
		delete(t.byID, id)
		t.mu.Unlock()
		return nil, err
	}
	return c, nil
}

func (t *codeContexts) get(id string) (*codeContext, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.byID[id]
	if !ok {
		return nil, fmt.Errorf("code: no context %q: %w", id, errdefs.ErrNotFound)
	}
	return c, nil
}

// defaultFor returns the default context of lang, creating it with set
// when it does not exist yet.
func (t *codeContexts) defaultFor(a *Agent, set contextSettings) (*codeContext, error) {
	id := defaultContextID(set.lang.name)
	if c, err := t.get(id); err == nil {
		return c, nil
	}
	c, err := t.create(a, id, true, set)
	if errors.Is(err, errdefs.ErrConflict) {
		return t.get(id) // created concurrently
	}
	return c, err
}

func (t *codeContexts) list() []api.CodeContext {
	t.mu.Lock()
	cs := slices.Collect(maps.Values(t.byID))
	t.mu.Unlock()
	out := make([]api.CodeContext, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.info())
	}
	slices.SortFunc(out, func(x, y api.CodeContext) int { return x.CreatedAt.Compare(y.CreatedAt) })
	return out
}

// remove forgets a context and kills its interpreter.
func (t *codeContexts) remove(id string) error {
	t.mu.Lock()
	c, ok := t.byID[id]
	delete(t.byID, id)
	t.mu.Unlock()
	if !ok {
		return fmt.Errorf("code: no context %q: %w", id, errdefs.ErrNotFound)
	}
	c.mu.Lock()
	c.deleted = true
	ip := c.ip
	c.ip = nil
	c.mu.Unlock()
	if ip != nil {
		ip.stop()
	}
	return nil
}

// startLocked starts a fresh interpreter; c.mu is held. It reports
// whether a previous one had died, losing the context's state.
func (c *codeContext) startLocked(a *Agent) (*interp, bool, error) {
	set := c.settings
	spec, err := a.resolveExec([]string{set.lang.binary}, set.user, set.env, set.cwd)
	if err != nil {
		return nil, false, err
	}
	sh := ""
	if set.lang.name == api.LanguageJavaScript {
		if sh, err = lookPath("sh", envValue(spec.env, "PATH"), spec.cwd); err != nil {
			return nil, false, err
		}
	}
	ip, err := a.startInterp(set.lang, spec, sh)
	if err != nil {
		return nil, false, err
	}
	died := c.died
	c.ip, c.died, c.count = ip, false, 0
	c.acct, c.dir = spec.acct.Name, spec.cwd
	return ip, died, nil
}

// interpreter returns the running interpreter, starting one if there is
// none (first use, or the last one died).
func (c *codeContext) interpreter(a *Agent) (ip *interp, restarted bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleted {
		return nil, false, fmt.Errorf("code: context %s was deleted: %w", c.id, errdefs.ErrNotFound)
	}
	if c.ip != nil && !c.ip.isGone() {
		return c.ip, false, nil
	}
	if c.ip != nil {
		c.ip.release()
		c.ip, c.died = nil, true
	}
	return c.startLocked(a)
}

// lost records that ip died; the next run starts a fresh one.
func (c *codeContext) lost(ip *interp) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ip == ip {
		c.ip, c.died = nil, true
	}
	ip.release()
}

// restart replaces the interpreter with a fresh one, interrupting any run.
func (c *codeContext) restart(a *Agent) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.deleted {
		return fmt.Errorf("code: context %s was deleted: %w", c.id, errdefs.ErrNotFound)
	}
	if c.ip != nil {
		c.ip.stop()
		c.ip = nil
	}
	c.died = false // asked for: the next run need not report it
	_, _, err := c.startLocked(a)
	return err
}

// nextCount numbers a run of ip.
func (c *codeContext) nextCount(ip *interp) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ip == ip {
		c.count++
	}
	return c.count
}

func (c *codeContext) info() api.CodeContext {
	c.mu.Lock()
	defer c.mu.Unlock()
	info := api.CodeContext{
		ID: c.id, Language: c.settings.lang.name, Default: c.dflt,
		User: c.acct, Cwd: c.dir, ExecutionCount: c.count, CreatedAt: c.created,
	}
	if c.ip != nil && !c.ip.isGone() {
		info.PID = c.ip.pid
	}
	return info
}

// acquire takes the context's run slot, waiting for a run in progress.
func (c *codeContext) acquire(ctx context.Context) error {
	select {
	case c.slot <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *codeContext) releaseSlot() { <-c.slot }

// stopTimeout bounds waiting for a killed interpreter to be reaped.
const stopTimeout = 5 * time.Second
