package server

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/agentproto"
)

// watchFiles streams the changes in a directory as NDJSON lines, or SSE
// events with Accept: text/event-stream or ?stream=sse, until the client
// goes away. The 200 and its headers are sent once the watch is in place,
// so a client knows every later change will be reported.
func (s *Server) watchFiles(w http.ResponseWriter, r *http.Request) error {
	p, err := queryPath(r)
	if err != nil {
		return err
	}
	recursive, err := queryBool(r, "recursive")
	if err != nil {
		return err
	}
	format, err := streamFormat(r)
	if err != nil {
		return err
	}
	if format == formatBuffered {
		format = formatNDJSON
	}
	c, err := s.agentFor(r)
	if err != nil {
		return err
	}
	wt, err := c.Watch(r.Context(), agentproto.WatchRequest{Path: p, Recursive: recursive})
	if err != nil {
		return err
	}
	defer wt.Close()
	ct := "application/x-ndjson"
	if format == formatSSE {
		ct = "text/event-stream"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	rc.Flush()
	for {
		evs, err := wt.Next()
		if err != nil {
			if r.Context().Err() == nil {
				writeFileEvent(w, format, api.FileEvent{Type: api.FileEventError, Error: errorBody(err)})
				rc.Flush()
			}
			return nil
		}
		for _, ev := range evs {
			if err := writeFileEvent(w, format, ev); err != nil {
				return nil // the client went away
			}
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
	}
}

func writeFileEvent(w http.ResponseWriter, format string, ev api.FileEvent) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if format == formatSSE {
		_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Type, b)
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
