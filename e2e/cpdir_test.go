package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockdev/airlock/api"
)

// TestCLICopyDir runs `airlock cp -r` both ways and `airlock watch`
// through the real binary.
func TestCLICopyDir(t *testing.T) {
	d := startDaemon(t, "")
	src := filepath.Join(t.TempDir(), "proj")
	makeTree(t, src)
	want := treeSnapshot(t, src)
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt})
			cp := func(args ...string) {
				t.Helper()
				if _, e, c := d.cli(t, "", append([]string{"cp", "-r"}, args...)...); c != 0 {
					t.Fatalf("cp -r %q: exit %d: %s", args, c, e)
				}
			}
			// Into an existing directory: lands as /home/user/proj.
			cp(src, sb.ID+":/home/user")
			// To a new path, and DIR/. for the contents.
			cp(src, sb.ID+":/home/user/copy")
			mustExec(t, sb, "mkdir /home/user/dot")
			cp(src+"/.", sb.ID+":/home/user/dot")
			out := mustExec(t, sb, "cd /home/user && for d in proj copy dot; do readlink $d/a/link; stat -c %s $d/a/b/c/blob.bin; done")
			if want := strings.Repeat("b/c/blob.bin\n1048576\n", 3); out != want {
				t.Errorf("in the sandbox:\n%s\nwant\n%s", out, want)
			}

			// Out to a new directory, and into an existing one.
			back := filepath.Join(t.TempDir(), "back")
			cp(sb.ID+":/home/user/proj", back)
			if got := treeSnapshot(t, back); !slices.Equal(got, want) {
				t.Errorf("cp -r out to a new directory:\n got %q\nwant %q", got, want)
			}
			into := t.TempDir()
			cp(sb.ID+":/home/user/copy", into)
			if got := treeSnapshot(t, filepath.Join(into, "copy")); !slices.Equal(got, want) {
				t.Errorf("cp -r out into a directory:\n got %q\nwant %q", got, want)
			}

			if _, e, c := d.cli(t, "", "cp", src, sb.ID+":/home/user/x"); c == 0 || !strings.Contains(e, "-r") {
				t.Errorf("cp of a directory without -r: exit %d, %q", c, e)
			}
			testCLIWatch(t, d, sb.ID)
		})
	}
}

// testCLIWatch runs `airlock watch --json` and checks it prints a change.
func testCLIWatch(t *testing.T, d *daemon, id string) {
	mustExecID := func(shell string) {
		t.Helper()
		if _, e, c := d.cli(t, "", "exec", "--shell", id, shell); c != 0 {
			t.Fatalf("%s: %s", shell, e)
		}
	}
	mustExecID("mkdir -p /home/user/w")
	cmd := exec.Command(filepath.Join(binDir, "airlock"), "watch", "--json", id, "/home/user/w")
	cmd.Env = append(os.Environ(), "AIRLOCK_HOST=http://"+d.addr)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	lines := make(chan api.FileEvent, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var ev api.FileEvent
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				lines <- ev
			}
		}
		close(lines)
	}()
	// The command cannot say when its watch is in place: poke until it
	// reports something, then check a change made after that.
	deadline := time.After(30 * time.Second)
	for seen := false; !seen; {
		mustExecID("touch /home/user/w/ping")
		select {
		case _, ok := <-lines:
			if !ok {
				t.Fatal("airlock watch exited")
			}
			seen = true
		case <-time.After(300 * time.Millisecond):
		case <-deadline:
			t.Fatal("airlock watch printed nothing")
		}
	}
	mustExecID("echo x > /home/user/w/new.txt")
	for {
		select {
		case ev, ok := <-lines:
			if !ok {
				t.Fatal("airlock watch exited")
			}
			if ev.Type == api.FileEventCreate && ev.Path == "/home/user/w/new.txt" {
				return
			}
		case <-deadline:
			t.Fatal("airlock watch did not print the create of new.txt")
		}
	}
}
