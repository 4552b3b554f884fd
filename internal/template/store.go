// Package template builds, caches and lists the root filesystem templates
// that sandboxes are created from.
//
// Layout under the store directory:
//
//	<dir>/<name>/template.json   metadata (Info)
//	<dir>/<name>/rootfs/         the root filesystem
//	<dir>/.build-<name>-<rand>/  in-progress build, renamed to <name> on success
//	<dir>/.cache/debootstrap/    .deb cache shared by debootstrap builds
//	<dir>/.<name>.lock           flock serialising builds across processes
package template

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/airlockdev/airlock/internal/errdefs"
)

// sentinel keeps a short message while still matching the cross-package
// errdefs kinds, so the HTTP layer maps template errors without knowing them.
type sentinel struct {
	msg  string
	kind error
}

func (e *sentinel) Error() string { return e.msg }
func (e *sentinel) Unwrap() error { return e.kind }

var (
	ErrNotFound      error = &sentinel{"template not found", errdefs.ErrNotFound}
	ErrInvalidName   error = &sentinel{"invalid template name", errdefs.ErrInvalidArgument}
	ErrUnknownRecipe error = &sentinel{"unknown template recipe", errdefs.ErrNotFound}
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

const (
	metaFile    = "template.json"
	rootfsDir   = "rootfs"
	buildPrefix = ".build-"
	oldPrefix   = ".old-"
)

// Info describes a built template.
type Info struct {
	Name      string    `json:"name"`
	Path      string    `json:"path"` // rootfs directory
	SizeBytes int64     `json:"size_bytes"`
	Packages  []string  `json:"packages,omitempty"`
	BuiltAt   time.Time `json:"built_at"`
	Builder   string    `json:"builder"` // "debootstrap" or "busybox"
	// Recipe fingerprints what was built (see fingerprint); a template
	// whose recipe has changed since is rebuilt by Build.
	Recipe string `json:"recipe,omitempty"`
}

// BuildOptions tune a build. Zero values select the defaults.
type BuildOptions struct {
	Force         bool   // rebuild even if cached
	Mirror        string // default http://deb.debian.org/debian
	Suite         string // default bookworm
	ExtraPackages []string
	AgentUID      int // default 1000; also used as the gid
}

func (o BuildOptions) withDefaults() (BuildOptions, error) {
	if o.Mirror == "" {
		o.Mirror = "http://deb.debian.org/debian"
	}
	if o.Suite == "" {
		o.Suite = "bookworm"
	}
	if o.AgentUID == 0 {
		o.AgentUID = 1000
	}
	if o.AgentUID < 0 || o.AgentUID >= 65534 {
		return o, fmt.Errorf("agent uid %d out of range", o.AgentUID)
	}
	return o, nil
}

// Store manages the templates under one directory.
type Store struct {
	dir string

	mu    sync.Mutex
	locks map[string]chan struct{}
}

// NewStore returns a store rooted at dir (normally <data>/templates). The
// directory is created on the first build.
func NewStore(dir string) *Store {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return &Store{dir: dir, locks: make(map[string]chan struct{})}
}

// Dir returns the store's root directory.
func (s *Store) Dir() string { return s.dir }

func validName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w: %q", ErrInvalidName, name)
	}
	return nil
}

// Get returns the metadata of a built template.
func (s *Store) Get(name string) (Info, error) {
	if err := validName(name); err != nil {
		return Info{}, err
	}
	b, err := os.ReadFile(filepath.Join(s.dir, name, metaFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Info{}, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err != nil {
		return Info{}, fmt.Errorf("read template %q: %w", name, err)
	}
	var info Info
	if err := json.Unmarshal(b, &info); err != nil {
		return Info{}, fmt.Errorf("parse template %q metadata: %w", name, err)
	}
	// Recompute rather than trust the file, so a moved data dir still works.
	info.Name = name
	info.Path = filepath.Join(s.dir, name, rootfsDir)
	if fi, err := os.Stat(info.Path); err != nil || !fi.IsDir() {
		return Info{}, fmt.Errorf("%w: %q (rootfs missing)", ErrNotFound, name)
	}
	return info, nil
}

// List returns all built templates sorted by name.
func (s *Store) List() ([]Info, error) {
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return []Info{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list templates: %w", err)
	}
	out := []Info{}
	for _, e := range entries {
		if !e.IsDir() || !nameRE.MatchString(e.Name()) {
			continue
		}
		info, err := s.Get(e.Name())
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Remove deletes a built template. It returns an error wrapping ErrNotFound
// if the template does not exist.
func (s *Store) Remove(name string) error {
	if err := validName(name); err != nil {
		return err
	}
	unlock, err := s.lock(context.Background(), name)
	if err != nil {
		return err
	}
	defer unlock()
	final := filepath.Join(s.dir, name)
	if _, err := os.Lstat(final); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	// Rename first so the template disappears atomically even if the
	// (slow) delete is interrupted.
	old := s.tempName(oldPrefix, name)
	if err := os.Rename(final, old); err != nil {
		return fmt.Errorf("remove template %q: %w", name, err)
	}
	if err := removeTree(old); err != nil {
		return fmt.Errorf("remove template %q: %w", name, err)
	}
	return nil
}

// Build builds the template called name from its recipe, or returns the
// cached one unless opts.Force is set or the recipe (its version, package
// list or options) has changed since the cached one was built. Progress lines are written to progress (which
// may be nil). Builds of the same name are serialised.
func (s *Store) Build(ctx context.Context, name string, opts BuildOptions, progress io.Writer) (Info, error) {
	if err := validName(name); err != nil {
		return Info{}, err
	}
	r, ok := recipes[name]
	if !ok {
		return Info{}, fmt.Errorf("%w: %q", ErrUnknownRecipe, name)
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return Info{}, fmt.Errorf("build template %q: %w", name, err)
	}
	if progress == nil {
		progress = io.Discard
	}
	want := fingerprint(r, opts)
	if !opts.Force {
		if info, err := s.Get(name); err == nil && info.Recipe == want {
			return info, nil
		}
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return Info{}, fmt.Errorf("build template %q: %w", name, err)
	}
	unlock, err := s.lock(ctx, name)
	if err != nil {
		return Info{}, fmt.Errorf("build template %q: %w", name, err)
	}
	defer unlock()
	// Someone else may have finished the same build while we waited.
	out := newLineWriter(progress, "template "+name+": ")
	defer out.Flush()
	if !opts.Force {
		info, err := s.Get(name)
		if err == nil && info.Recipe == want {
			return info, nil
		}
		if err == nil {
			out.Printf("recipe changed since it was built (%s, now %s): rebuilding", orNone(info.Recipe), want)
		}
	}
	s.cleanStale(name, out)
	info, err := s.build(ctx, name, r, opts, out)
	if err != nil {
		out.Printf("failed: %v", err)
		return Info{}, fmt.Errorf("build template %q: %w", name, err)
	}
	return info, nil
}

func (s *Store) build(ctx context.Context, name string, r recipe, opts BuildOptions, out *lineWriter) (Info, error) {
	start := time.Now()
	stage, err := os.MkdirTemp(s.dir, buildPrefix+name+"-")
	if err != nil {
		return Info{}, err
	}
	success := false
	defer func() {
		if success {
			return
		}
		if err := removeTree(stage); err != nil {
			out.Printf("cleanup of %s failed: %v", stage, err)
		}
	}()
	rootfs := filepath.Join(stage, rootfsDir)
	if err := os.Chmod(stage, 0o755); err != nil {
		return Info{}, err
	}
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return Info{}, err
	}

	env := &buildEnv{rootfs: rootfs, cacheDir: filepath.Join(s.dir, ".cache"), opts: opts, out: out}
	pkgs, err := r.build(ctx, env)
	if err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, err
	}
	out.Printf("finalizing rootfs")
	if err := finalize(rootfs, opts.AgentUID, r.shell); err != nil {
		return Info{}, fmt.Errorf("finalize rootfs: %w", err)
	}
	size, err := dirSize(rootfs)
	if err != nil {
		return Info{}, fmt.Errorf("measure rootfs: %w", err)
	}
	info := Info{
		Name:      name,
		Path:      filepath.Join(s.dir, name, rootfsDir),
		SizeBytes: size,
		Packages:  pkgs,
		BuiltAt:   time.Now().UTC().Truncate(time.Millisecond),
		Builder:   r.builder,
		Recipe:    fingerprint(r, opts),
	}
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return Info{}, err
	}
	if err := os.WriteFile(filepath.Join(stage, metaFile), append(b, '\n'), 0o644); err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, err
	}
	if err := s.publish(stage, name, out); err != nil {
		return Info{}, err
	}
	success = true
	out.Printf("done in %s, %d MB", time.Since(start).Round(time.Second), (size+500_000)/1_000_000)
	return info, nil
}

// publish moves the finished stage dir to <dir>/<name>, replacing any
// previous build. Directories cannot be renamed over non-empty ones, so an
// existing build is moved aside first and restored if the swap fails.
func (s *Store) publish(stage, name string, out *lineWriter) error {
	final := filepath.Join(s.dir, name)
	var old string
	if _, err := os.Lstat(final); err == nil {
		old = s.tempName(oldPrefix, name)
		if err := os.Rename(final, old); err != nil {
			return fmt.Errorf("move previous build aside: %w", err)
		}
	}
	if err := os.Rename(stage, final); err != nil {
		if old != "" {
			_ = os.Rename(old, final)
		}
		return fmt.Errorf("publish: %w", err)
	}
	if old != "" {
		if mountedLower(filepath.Join(final, rootfsDir)) {
			out.Printf("previous build is in use by running sandboxes: kept as %s until a later build", filepath.Base(old))
		} else if err := removeTree(old); err != nil {
			out.Printf("removing previous build failed: %v", err)
		}
	}
	return nil
}

// UpToDate reports whether name is built from its current recipe with
// default options, so Build would return it as it is.
func (s *Store) UpToDate(name string) bool {
	r, ok := recipes[name]
	if !ok {
		return false
	}
	opts, err := BuildOptions{}.withDefaults()
	if err != nil {
		return false
	}
	info, err := s.Get(name)
	return err == nil && info.Recipe == fingerprint(r, opts)
}

func orNone(s string) string {
	if s == "" {
		return "none recorded"
	}
	return s
}

func (s *Store) tempName(prefix, name string) string {
	return filepath.Join(s.dir, prefix+name+"-"+strconv.FormatUint(uint64(rand.Uint32()), 10))
}
