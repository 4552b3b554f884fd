package server

import (
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// queryPath returns the required ?path= parameter.
func queryPath(r *http.Request) (string, error) {
	p := r.URL.Query().Get("path")
	if p == "" {
		return "", fmt.Errorf("%w: query parameter path is required", errdefs.ErrInvalidArgument)
	}
	return p, nil
}

func queryBool(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%w: query parameter %s must be true or false, got %q", errdefs.ErrInvalidArgument, name, v)
	}
	return b, nil
}

// agentFor resolves the sandbox in the path to its agent client.
func (s *Server) agentFor(r *http.Request) (*agentproto.Client, error) {
	return s.sandboxes.Agent(r.Context(), r.PathValue("id"))
}

func (s *Server) download(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r)
	if err != nil {
		return err
	}
	c, err := s.agentFor(r)
	if err != nil {
		return err
	}
	info, rc, err := c.OpenFile(r.Context(), p)
	if err != nil {
		return err
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(info.Size, 10))
	s.sendBody(w, rc, p)
	return nil
}

// sendBody answers 200 with body. Once headers are out, an aborted
// connection is the only way to tell the client the body is incomplete.
func (s *Server) sendBody(w http.ResponseWriter, body io.Reader, path string) {
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, body); err != nil {
		s.log.Warn("download aborted", "path", path, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// upload streams the request body into a file: PUT ?path=P[&mode=0644].
func (s *Server) upload(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r)
	if err != nil {
		return err
	}
	mode := uint64(0o644)
	if m := r.URL.Query().Get("mode"); m != "" {
		if mode, err = strconv.ParseUint(m, 8, 32); err != nil || mode > 0o7777 {
			return fmt.Errorf("%w: mode must be octal permission bits like 0644, got %q", errdefs.ErrInvalidArgument, m)
		}
	}
	c, err := s.agentFor(r)
	if err != nil {
		return err
	}
	// The agent may refuse midway (disk full): answer while the client is
	// still sending, as for tar uploads.
	http.NewResponseController(w).EnableFullDuplex()
	in := &readTracker{r: r.Body}
	n, err := c.WriteFile(r.Context(), agentproto.Request{
		Path: p, Mode: uint32(mode), Parents: true, User: r.URL.Query().Get("user"),
	}, in)
	if err != nil {
		if in.read && r.Context().Err() == nil {
			s.failUpload(w, r, err)
			return nil
		}
		return err
	}
	return writeJSON(w, http.StatusCreated, api.UploadResult{Path: p, Size: n})
}

func (s *Server) removeFile(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r)
	if err != nil {
		return err
	}
	recursive, err := queryBool(r, "recursive")
	if err != nil {
		return err
	}
	c, err := s.agentFor(r)
	if err != nil {
		return err
	}
	if err := c.Remove(r.Context(), p, recursive); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) statFile(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r)
	if err != nil {
		return err
	}
	c, err := s.agentFor(r)
	if err != nil {
		return err
	}
	info, err := c.Stat(r.Context(), p)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, info)
}

func (s *Server) listFiles(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r)
	if err != nil {
		return err
	}
	depth := 1
	if d := r.URL.Query().Get("depth"); d != "" {
		if depth, err = strconv.Atoi(d); err != nil || depth < 1 || depth > 10 {
			return fmt.Errorf("%w: depth must be between 1 and 10, got %q", errdefs.ErrInvalidArgument, d)
		}
	}
	c, err := s.agentFor(r)
	if err != nil {
		return err
	}
	files, err := c.List(r.Context(), p, depth)
	if err != nil {
		return err
	}
	if files == nil {
		files = []api.FileInfo{}
	}
	return writeJSON(w, http.StatusOK, api.FileList{Files: files})
}

func (s *Server) mkdir(w http.ResponseWriter, r *http.Request) error {
	var req api.MkdirRequest
	if err := decodeJSON(w, r, maxJSONBody, &req); err != nil {
		return err
	}
	if req.Path == "" {
		return fmt.Errorf("%w: path is required", errdefs.ErrInvalidArgument)
	}
	c, err := s.agentFor(r)
	if err != nil {
		return err
	}
	if err := c.Mkdir(r.Context(), req.Path, req.Parents, ""); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) rename(w http.ResponseWriter, r *http.Request) error {
	var req api.RenameRequest
	if err := decodeJSON(w, r, maxJSONBody, &req); err != nil {
		return err
	}
	if req.From == "" || req.To == "" {
		return fmt.Errorf("%w: from and to are required", errdefs.ErrInvalidArgument)
	}
	c, err := s.agentFor(r)
	if err != nil {
		return err
	}
	if err := c.Rename(r.Context(), req.From, req.To); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
