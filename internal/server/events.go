package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
)

// eventStream writes a response of events as NDJSON lines or SSE events,
// flushing each so clients see output as it is produced. Headers go out
// with the first event, so a request that fails before any event still
// gets a plain JSON error. T is the API's event type for the route.
type eventStream[T any] struct {
	w      http.ResponseWriter
	format string
	// data builds the event that carries a chunk of output of one type.
	data func(typ string, p []byte) T
	// name returns an event's type, used as the SSE event name.
	name func(T) string

	mu   sync.Mutex
	sent bool
	err  error
}

func (e *eventStream[T]) started() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sent
}

func (e *eventStream[T]) send(ev T) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return e.err
	}
	if !e.sent {
		ct := "application/x-ndjson"
		if e.format == formatSSE {
			ct = "text/event-stream"
		}
		e.w.Header().Set("Content-Type", ct)
		e.w.Header().Set("Cache-Control", "no-store")
		e.w.Header().Set("X-Accel-Buffering", "no")
		e.w.WriteHeader(http.StatusOK)
		e.sent = true
	}
	b, err := json.Marshal(ev)
	if err != nil {
		e.err = err
		return err
	}
	if e.format == formatSSE {
		_, e.err = fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", e.name(ev), b)
	} else {
		_, e.err = e.w.Write(append(b, '\n'))
	}
	if e.err == nil {
		http.NewResponseController(e.w).Flush()
	}
	return e.err
}

// writer returns an io.Writer that sends each write as an event of typ.
func (e *eventStream[T]) writer(typ string) eventWriter[T] {
	return eventWriter[T]{es: e, typ: typ}
}

type eventWriter[T any] struct {
	es  *eventStream[T]
	typ string
}

func (w eventWriter[T]) Write(p []byte) (int, error) {
	if err := w.es.send(w.es.data(w.typ, p)); err != nil {
		return 0, err
	}
	return len(p), nil
}
