package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/airlockdev/airlock/api"
)

// Upload writes what r yields to the file at path (absolute) in the
// sandbox, creating missing parent directories and replacing an existing
// file. The body is streamed, never held in memory, so files of any size
// can be sent. mode gives the permission bits (0 means 0644). It returns
// the number of bytes written. Upload does not close r.
func (s *Sandbox) Upload(ctx context.Context, path string, r io.Reader, mode os.FileMode) (int64, error) {
	p, err := sandboxPath(s.ID, "/files")
	if err != nil {
		return 0, err
	}
	q := url.Values{"path": {path}}
	if mode != 0 {
		q.Set("mode", fmt.Sprintf("%04o", unixMode(mode)))
	}
	size := bodySize(r)
	var body io.Reader = http.NoBody
	if size != 0 {
		// NopCloser: the transport closes request bodies, and r is the
		// caller's to close.
		body = io.NopCloser(r)
	}
	req, err := s.c.newRequest(ctx, http.MethodPut, p, q, body)
	if err != nil {
		return 0, err
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Accept", "application/json")
	if size != 0 {
		// Let the daemon refuse (no such sandbox, bad path) before the
		// body is sent.
		req.Header.Set("Expect", "100-continue")
	}
	resp, err := s.c.do(req)
	if err != nil {
		return 0, err
	}
	defer closeBody(resp)
	var res api.UploadResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		return 0, fmt.Errorf("airlock: decode upload response: %w", err)
	}
	return res.Size, nil
}

// unixMode converts Go's FileMode to unix permission bits.
func unixMode(m os.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&os.ModeSetuid != 0 {
		u |= 0o4000
	}
	if m&os.ModeSetgid != 0 {
		u |= 0o2000
	}
	if m&os.ModeSticky != 0 {
		u |= 0o1000
	}
	return u
}

// bodySize is the number of bytes r will yield if that is known up front,
// else -1.
func bodySize(r io.Reader) int64 {
	switch v := r.(type) {
	case nil:
		return 0
	case *bytes.Buffer:
		return int64(v.Len())
	case *bytes.Reader:
		return int64(v.Len())
	case *strings.Reader:
		return int64(v.Len())
	case *os.File:
		fi, err := v.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return -1
		}
		off, err := v.Seek(0, io.SeekCurrent)
		if err != nil || off > fi.Size() {
			return -1
		}
		return fi.Size() - off
	}
	return -1
}

// Download copies the regular file at path in the sandbox to w, streaming
// it. It returns the number of bytes copied, and an error wrapping
// io.ErrUnexpectedEOF if the transfer ended before the whole file arrived.
func (s *Sandbox) Download(ctx context.Context, path string, w io.Writer) (int64, error) {
	p, err := sandboxPath(s.ID, "/files")
	if err != nil {
		return 0, err
	}
	req, err := s.c.newRequest(ctx, http.MethodGet, p, url.Values{"path": {path}}, nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.c.do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if want := resp.ContentLength; want >= 0 && n != want {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return n, fmt.Errorf("airlock: download %s: incomplete, got %d of %d bytes: %w", path, n, want, err)
	}
	if err != nil {
		return n, fmt.Errorf("airlock: download %s: %w", path, err)
	}
	return n, nil
}

// Stat describes the file or directory at path.
func (s *Sandbox) Stat(ctx context.Context, path string) (*api.FileInfo, error) {
	p, err := sandboxPath(s.ID, "/files/stat")
	if err != nil {
		return nil, err
	}
	var fi api.FileInfo
	if err := s.c.doJSON(ctx, http.MethodGet, p, url.Values{"path": {path}}, nil, &fi); err != nil {
		return nil, err
	}
	return &fi, nil
}

// List lists the directory at path, descending depth levels (1 lists only
// its entries; 0 means the daemon's default of 1).
func (s *Sandbox) List(ctx context.Context, path string, depth int) ([]api.FileInfo, error) {
	p, err := sandboxPath(s.ID, "/files/list")
	if err != nil {
		return nil, err
	}
	q := url.Values{"path": {path}}
	if depth != 0 {
		q.Set("depth", strconv.Itoa(depth))
	}
	var list api.FileList
	if err := s.c.doJSON(ctx, http.MethodGet, p, q, nil, &list); err != nil {
		return nil, err
	}
	return list.Files, nil
}

// Mkdir creates a directory, and its missing parents if parents is set.
func (s *Sandbox) Mkdir(ctx context.Context, path string, parents bool) error {
	p, err := sandboxPath(s.ID, "/files/mkdir")
	if err != nil {
		return err
	}
	return s.c.doJSON(ctx, http.MethodPost, p, nil, api.MkdirRequest{Path: path, Parents: parents}, nil)
}

// Remove deletes a file or empty directory, or a whole tree if recursive.
func (s *Sandbox) Remove(ctx context.Context, path string, recursive bool) error {
	p, err := sandboxPath(s.ID, "/files")
	if err != nil {
		return err
	}
	q := url.Values{"path": {path}}
	if recursive {
		q.Set("recursive", "true")
	}
	return s.c.doJSON(ctx, http.MethodDelete, p, q, nil, nil)
}

// Rename moves a file or directory within the sandbox.
func (s *Sandbox) Rename(ctx context.Context, from, to string) error {
	p, err := sandboxPath(s.ID, "/files/rename")
	if err != nil {
		return err
	}
	return s.c.doJSON(ctx, http.MethodPost, p, nil, api.RenameRequest{From: from, To: to}, nil)
}
