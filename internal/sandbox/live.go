package sandbox

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/agentproto"
)

// live is a sandbox this daemon manages, with its agent connection.
type live struct {
	rec    api.Sandbox // guarded by Manager.mu
	drv    Driver
	cancel context.CancelFunc

	mu     sync.Mutex
	client *agentproto.Client
	ready  chan struct{} // closed while client is set
}

func newLive(rec api.Sandbox, drv Driver, cancel context.CancelFunc) *live {
	return &live{rec: rec, drv: drv, cancel: cancel, ready: make(chan struct{})}
}

// agent waits for a working agent connection.
func (l *live) agent(ctx context.Context) (*agentproto.Client, error) {
	for {
		l.mu.Lock()
		c, ready := l.client, l.ready
		l.mu.Unlock()
		if c != nil {
			select {
			case <-c.Done():
				// Dead; the connect loop will replace it.
			default:
				return c, nil
			}
		}
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (l *live) setClient(c *agentproto.Client) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.client = c
	close(l.ready)
}

func (l *live) clearClient() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.client != nil {
		l.client.Close()
		l.client = nil
		l.ready = make(chan struct{})
	}
}

// shutdown stops the connect loop and drops the connection.
func (l *live) shutdown() {
	l.cancel()
	l.clearClient()
}

// connectLoop keeps one verified agent connection up until ctx ends. The
// agent redials whenever its connection drops, so this only has to accept.
func (l *live) connectLoop(ctx context.Context, log *slog.Logger) {
	id := l.rec.ID
	for ctx.Err() == nil {
		conn, err := l.drv.Connect(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("agent connect", "id", id, "err", err)
				sleep(ctx, 200*time.Millisecond)
			}
			continue
		}
		c, err := agentproto.NewClient(conn)
		if err != nil {
			conn.Close()
			continue
		}
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = c.Hello(hctx)
		cancel()
		if err != nil {
			log.Warn("agent hello", "id", id, "err", err)
			c.Close()
			continue
		}
		l.setClient(c)
		select {
		case <-c.Done():
		case <-ctx.Done():
		}
		l.clearClient()
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
