package e2e

import (
	"bufio"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/client"
)

// watchEvents reads events from w in the background.
func watchEvents(w *client.Watcher) (<-chan api.FileEvent, <-chan error) {
	evs, errc := make(chan api.FileEvent, 1000), make(chan error, 1)
	go func() {
		for {
			ev, err := w.Next()
			if err != nil {
				errc <- err
				close(evs)
				return
			}
			evs <- ev
		}
	}()
	return evs, errc
}

// expectFileEvents reads until want (events rendered as "type path[ ->
// new][/]", paths relative to root) have arrived in order. Writes right
// after a create or write of the same file are folded: how many events a
// shell's write makes is up to the kernel, and a file written in a
// directory that appeared a moment earlier may have been written before
// the directory was watched.
func expectFileEvents(t *testing.T, root string, evs <-chan api.FileEvent, want ...string) {
	t.Helper()
	var got []string
	var last string
	timeout := time.After(20 * time.Second)
	for len(got) < len(want) {
		select {
		case ev, ok := <-evs:
			if !ok {
				t.Fatalf("watch ended; got %q, want %q", got, want)
			}
			rel := strings.TrimPrefix(strings.TrimPrefix(ev.Path, root), "/")
			if ev.Type == api.FileEventWrite && ev.Path == last {
				continue
			}
			last = ev.Path
			s := ev.Type + " " + rel
			if ev.NewPath != "" {
				s += " -> " + strings.TrimPrefix(ev.NewPath, root+"/")
			}
			if ev.IsDir {
				s += "/"
			}
			got = append(got, s)
		case <-timeout:
			t.Fatalf("timed out; got %q, want %q", got, want)
		}
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("events:\n got %q\nwant %q", got, want)
	}
}

func TestWatch(t *testing.T) {
	d := startDaemon(t, "")
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt})
			ctx := testCtx(t, 2*time.Minute)
			const root = "/home/user/w"
			mustExec(t, sb, "mkdir -p "+root+"/old && echo 1 > "+root+"/existing")

			w, err := sb.Watch(ctx, root, false)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			evs, errc := watchEvents(w)
			mustExec(t, sb, "cd "+root+" && echo 2 >> existing && echo hi > f && echo more >> f && mv f g && mkdir d && rm g && rmdir d && echo x > old/ignored")
			expectFileEvents(t, root, evs, "write existing", "create f", "rename f -> g", "create d/", "remove g", "remove d/")

			rw, err := sb.Watch(ctx, root, true)
			if err != nil {
				t.Fatal(err)
			}
			defer rw.Close()
			revs, _ := watchEvents(rw)
			mustExec(t, sb, "cd "+root+" && echo x > old/f && mkdir -p new/deep && echo y > new/deep/f")
			mustExec(t, sb, "cd "+root+" && echo z > new/deep/g && mv new renamed && rm renamed/deep/f")
			expectFileEvents(t, root, revs,
				"create old/f", "create new/", "create new/deep/", "create new/deep/f",
				"create new/deep/g", "rename new -> renamed/", "remove renamed/deep/f")

			// The same stream as server-sent events.
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.addr+"/v1/sandboxes/"+sb.ID+"/files/watch?stream=sse&path="+root, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
				t.Fatalf("SSE watch: %d %s", resp.StatusCode, ct)
			}
			mustExec(t, sb, "touch "+root+"/sse")
			br := bufio.NewReader(resp.Body)
			ev, _ := br.ReadString('\n')
			data, _ := br.ReadString('\n')
			if ev != "event: create\n" || !strings.HasPrefix(data, "data: {") || !strings.Contains(data, `"path":"`+root+`/sse"`) {
				t.Errorf("SSE event: %q %q", ev, data)
			}
			resp.Body.Close()

			// Removing the watched directory ends the watch.
			mustExec(t, sb, "rm -rf "+root)
			for range evs {
			}
			if err := <-errc; !errors.Is(err, client.ErrNotFound) {
				t.Errorf("watch of a removed directory ended with %v, want ErrNotFound", err)
			}
			if _, err := sb.Watch(ctx, root, false); !errors.Is(err, client.ErrNotFound) {
				t.Errorf("watch a missing directory: %v, want ErrNotFound", err)
			}
			if _, err := sb.Watch(ctx, "/etc/passwd", false); !errors.Is(err, client.ErrInvalidArgument) {
				t.Errorf("watch a file: %v, want ErrInvalidArgument", err)
			}
		})
	}
}
