package server

import (
	"compress/gzip"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// downloadTar streams a directory (or one file) as an uncompressed tar.
func (s *Server) downloadTar(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r)
	if err != nil {
		return err
	}
	c, err := s.agentFor(r)
	if err != nil {
		return err
	}
	rc, err := c.ReadTar(r.Context(), p)
	if err != nil {
		return err
	}
	defer rc.Close()
	name := path.Base(p)
	if name == "/" || name == "." {
		name = "root"
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": name + ".tar"}))
	s.sendBody(w, rc, p)
	return nil
}

// uploadTar extracts the request body, a tar (gzip-compressed with
// Content-Encoding: gzip or Content-Type: application/gzip), into the
// directory ?path=, capped by ?max_bytes= and ?max_entries=.
func (s *Server) uploadTar(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r)
	if err != nil {
		return err
	}
	maxBytes, err := queryPositive(r, "max_bytes")
	if err != nil {
		return err
	}
	maxEntries, err := queryPositive(r, "max_entries")
	if err != nil {
		return err
	}
	c, err := s.agentFor(r)
	if err != nil {
		return err
	}
	// The agent may refuse the archive midway, and the answer must then
	// go out while the client is still sending.
	http.NewResponseController(w).EnableFullDuplex()
	in := &readTracker{r: r.Body}
	var body io.Reader = in
	if isGzip(r) {
		zr, err := gzip.NewReader(in)
		if err != nil {
			return fmt.Errorf("%w: request body is not gzip: %v", errdefs.ErrInvalidArgument, err)
		}
		defer zr.Close()
		body = badInput{zr}
	}
	rep, err := c.WriteTar(r.Context(), agentproto.TarRequest{
		Path: p, User: r.URL.Query().Get("user"), MaxBytes: maxBytes, MaxEntries: maxEntries,
	}, body)
	if err != nil {
		if in.read && r.Context().Err() == nil {
			s.failUpload(w, r, err)
			return nil
		}
		return err
	}
	return writeJSON(w, http.StatusOK, api.TarResult{Path: p, Entries: rep.Entries, Bytes: rep.Bytes})
}

// Bounds on reading what is left of a refused upload.
const (
	drainTime  = 2 * time.Second
	drainBytes = 64 << 20
)

// failUpload answers err to a request whose body was partly read, then
// keeps reading the body briefly. Otherwise the server closes the
// connection with unread data and the client's TCP stack, reset, can lose
// the answer before the client reads it.
func (s *Server) failUpload(w http.ResponseWriter, r *http.Request, err error) {
	w.Header().Set("Connection", "close")
	s.writeError(w, r, err)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return
	}
	rc.SetReadDeadline(time.Now().Add(drainTime))
	io.CopyN(io.Discard, r.Body, drainBytes)
}

// readTracker notes whether a body was read at all: until it is, a client
// that sent Expect: 100-continue has sent nothing.
type readTracker struct {
	r    io.Reader
	read bool
}

func (t *readTracker) Read(p []byte) (int, error) {
	t.read = true
	return t.r.Read(p)
}

func isGzip(r *http.Request) bool {
	if strings.EqualFold(strings.TrimSpace(r.Header.Get("Content-Encoding")), "gzip") {
		return true
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return mt == "application/gzip" || mt == "application/x-gzip"
}

// badInput classifies errors decoding the body (a corrupt gzip stream) as
// the client's.
type badInput struct{ r io.Reader }

func (b badInput) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: decompress request body: %w", errdefs.ErrInvalidArgument, err)
	}
	return n, err
}

// queryPositive returns an optional positive integer parameter, 0 when
// absent.
func queryPositive(r *http.Request, name string) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%w: query parameter %s must be a positive integer, got %q", errdefs.ErrInvalidArgument, name, v)
	}
	return n, nil
}
