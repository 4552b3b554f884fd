package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/archive"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// TarOption tunes a directory transfer.
type TarOption func(*tarOptions)

type tarOptions struct {
	maxBytes, maxEntries int64
	gzip                 bool
	user                 string
}

// TarMaxBytes caps the total size of the files an archive may hold (the
// daemon's default is 10 GiB; for downloads, archive.DefaultMaxBytes).
func TarMaxBytes(n int64) TarOption { return func(o *tarOptions) { o.maxBytes = n } }

// TarMaxEntries caps the number of entries an archive may hold (default
// 100000).
func TarMaxEntries(n int64) TarOption { return func(o *tarOptions) { o.maxEntries = n } }

// TarGzip says the archive given to UploadTar is gzip-compressed.
func TarGzip() TarOption { return func(o *tarOptions) { o.gzip = true } }

// TarUser makes user (a name or uid) the owner of what an upload creates
// instead of the sandbox's default user.
func TarUser(user string) TarOption { return func(o *tarOptions) { o.user = user } }

func tarOpts(opts []TarOption) tarOptions {
	var o tarOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// UploadTar extracts the tar archive r yields into the directory dir of
// the sandbox, creating it if needed, and streams it: archives of any
// size work. The daemon refuses archives whose entries would land outside
// dir (ErrInvalidArgument) or that exceed the caps (ErrResourceExhausted);
// a refused or failed upload leaves dir as it was. UploadTar does not
// close r.
func (s *Sandbox) UploadTar(ctx context.Context, dir string, r io.Reader, opts ...TarOption) (*api.TarResult, error) {
	p, err := sandboxPath(s.ID, "/files/tar")
	if err != nil {
		return nil, err
	}
	o := tarOpts(opts)
	q := url.Values{"path": {dir}}
	if o.maxBytes > 0 {
		q.Set("max_bytes", strconv.FormatInt(o.maxBytes, 10))
	}
	if o.maxEntries > 0 {
		q.Set("max_entries", strconv.FormatInt(o.maxEntries, 10))
	}
	if o.user != "" {
		q.Set("user", o.user)
	}
	req, err := s.c.newRequest(ctx, http.MethodPut, p, q, io.NopCloser(r))
	if err != nil {
		return nil, err
	}
	req.ContentLength = bodySize(r)
	req.Header.Set("Content-Type", "application/x-tar")
	if o.gzip {
		req.Header.Set("Content-Type", "application/gzip")
	}
	req.Header.Set("Accept", "application/json")
	// Let the daemon refuse (no such sandbox, bad path) before the body
	// is sent.
	req.Header.Set("Expect", "100-continue")
	resp, err := s.c.do(req)
	if err != nil {
		return nil, err
	}
	defer closeBody(resp)
	var res api.TarResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return nil, fmt.Errorf("airlock: decode tar upload response: %w", err)
	}
	return &res, nil
}

// DownloadTar writes the directory dir of the sandbox (or the file dir
// names) to w as an uncompressed tar archive, streaming it. It returns the
// archive's size, and an error wrapping io.ErrUnexpectedEOF if the
// transfer broke off: the daemon aborts rather than end a partial archive
// cleanly.
func (s *Sandbox) DownloadTar(ctx context.Context, dir string, w io.Writer) (int64, error) {
	body, err := s.openTar(ctx, dir)
	if err != nil {
		return 0, err
	}
	defer body.Close()
	n, err := io.Copy(w, body)
	if err != nil {
		return n, fmt.Errorf("airlock: download %s as tar: %w", dir, err)
	}
	return n, nil
}

func (s *Sandbox) openTar(ctx context.Context, dir string) (io.ReadCloser, error) {
	p, err := sandboxPath(s.ID, "/files/tar")
	if err != nil {
		return nil, err
	}
	req, err := s.c.newRequest(ctx, http.MethodGet, p, url.Values{"path": {dir}}, nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.c.do(req)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// UploadDir copies the local directory localDir (or a single file) into
// the sandbox's directory remoteDir: the contents of localDir become the
// contents of remoteDir, merged with what is there. Symlinks are copied
// as links; sockets, devices and fifos are skipped.
func (s *Sandbox) UploadDir(ctx context.Context, localDir, remoteDir string, opts ...TarOption) (*api.TarResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, pw := io.Pipe()
	werr := make(chan error, 1)
	go func() {
		_, err := archive.Write(ctx, pw, localDir, archive.WriteOptions{})
		pw.CloseWithError(err)
		werr <- err
	}()
	res, err := s.UploadTar(ctx, remoteDir, pr, append(opts, func(o *tarOptions) { o.gzip = false })...)
	pr.CloseWithError(errors.New("upload ended"))
	cancel()
	if lerr := <-werr; lerr != nil && err != nil && !errors.Is(lerr, context.Canceled) {
		return nil, localError{fmt.Errorf("airlock: archive %s: %w", localDir, lerr)}
	}
	return res, err
}

// DownloadDir copies the sandbox's directory remoteDir (or a single file)
// into the local directory localDir, creating it if needed. Extraction is
// as strict as the sandbox's own: entries that would land outside
// localDir are refused (ErrInvalidArgument), so are symlinks that are
// absolute or point outside it; TarMaxBytes and TarMaxEntries cap the
// archive (ErrResourceExhausted). A failed download leaves localDir as it
// was.
func (s *Sandbox) DownloadDir(ctx context.Context, remoteDir, localDir string, opts ...TarOption) (*api.TarResult, error) {
	o := tarOpts(opts)
	body, err := s.openTar(ctx, remoteDir)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	res, err := archive.Extract(ctx, body, localDir, archive.ExtractOptions{MaxBytes: o.maxBytes, MaxEntries: o.maxEntries})
	if err != nil {
		return nil, localError{fmt.Errorf("airlock: download %s to %s: %w", remoteDir, localDir, err)}
	}
	return &api.TarResult{Path: localDir, Entries: res.Entries, Bytes: res.Bytes}, nil
}

// localError is an error of a local step (archiving or extracting on this
// machine). It matches the client's sentinels like an *APIError would.
type localError struct{ err error }

func (e localError) Error() string { return e.err.Error() }
func (e localError) Unwrap() error { return e.err }

var localSentinels = map[error]error{
	ErrInvalidArgument:   errdefs.ErrInvalidArgument,
	ErrNotFound:          errdefs.ErrNotFound,
	ErrConflict:          errdefs.ErrConflict,
	ErrResourceExhausted: errdefs.ErrResourceExhausted,
}

func (e localError) Is(target error) bool {
	s, ok := localSentinels[target]
	return ok && errors.Is(e.err, s)
}
