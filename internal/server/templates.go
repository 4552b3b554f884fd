package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/airlockdev/airlock/api"
)

func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request) error {
	tpls, err := s.templates.List()
	if err != nil {
		return err
	}
	if tpls == nil {
		tpls = []api.Template{}
	}
	return writeJSON(w, http.StatusOK, api.TemplateList{Templates: tpls})
}

// buildTemplate builds a template and streams its progress as NDJSON.
func (s *Server) buildTemplate(w http.ResponseWriter, r *http.Request) error {
	var req api.BuildTemplateRequest
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, maxJSONBody, &req); err != nil {
			return err
		}
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	lw := &lineWriter{emit: func(line string) {
		writeEvent(w, api.TemplateBuildEvent{Type: "log", Line: line})
	}}
	tpl, err := s.templates.Build(r.Context(), r.PathValue("name"), req.Force, lw)
	lw.flush()
	if err != nil {
		writeEvent(w, api.TemplateBuildEvent{Type: "error", Error: errorBody(err)})
		return nil
	}
	writeEvent(w, api.TemplateBuildEvent{Type: "done", Template: &tpl})
	return nil
}

// writeEvent is called under lineWriter's lock or after the build ends, so
// writes never interleave.
func writeEvent(w http.ResponseWriter, ev api.TemplateBuildEvent) {
	b, _ := json.Marshal(ev)
	w.Write(append(b, '\n'))
	http.NewResponseController(w).Flush()
}

// lineWriter splits what is written into lines.
type lineWriter struct {
	mu   sync.Mutex
	buf  []byte
	emit func(string)
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.emit(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

func (l *lineWriter) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.emit(string(l.buf))
		l.buf = nil
	}
}
