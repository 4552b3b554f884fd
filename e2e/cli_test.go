package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/airlockdev/airlock/api"
)

// cli runs the airlock binary against d and returns stdout, stderr and the
// exit code.
func (d *daemon) cli(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "airlock"), args...)
	cmd.Env = append(os.Environ(), "AIRLOCK_HOST=http://"+d.addr)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func TestCLI(t *testing.T) {
	d := startDaemon(t, "")
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			out, errOut, code := d.cli(t, "", "create", "--runtime", rt, "--template", "busybox", "--label", "suite=cli", "--env", "GREETING=hi")
			id := strings.TrimSpace(out)
			if code != 0 || !strings.HasPrefix(id, "sb-") || strings.Contains(id, "\n") {
				t.Fatalf("create: %q %q %d", out, errOut, code)
			}
			defer d.cli(t, "", "rm", id)

			out, errOut, code = d.cli(t, "", "exec", id, "--", "sh", "-c", "echo out $GREETING; echo err >&2; exit 3")
			if out != "out hi\n" || errOut != "err\n" || code != 3 {
				t.Errorf("exec: %q %q %d", out, errOut, code)
			}
			out, _, code = d.cli(t, "", "exec", "--cwd", "/tmp", "--env", "X=1", id, "--", "sh", "-c", "echo $X $(pwd)")
			if out != "1 /tmp\n" || code != 0 {
				t.Errorf("exec with flags: %q %d", out, code)
			}
			out, _, _ = d.cli(t, "piped input", "exec", "-i", id, "--", "cat")
			if out != "piped input" {
				t.Errorf("exec -i: %q", out)
			}

			dir := t.TempDir()
			src := filepath.Join(dir, "data.csv")
			os.WriteFile(src, []byte("a,b\n1,2\n"), 0o644)
			if _, e, c := d.cli(t, "", "cp", src, id+":/home/user/data.csv"); c != 0 {
				t.Fatalf("cp up: %s", e)
			}
			back := filepath.Join(dir, "back.csv")
			if _, e, c := d.cli(t, "", "cp", id+":/home/user/data.csv", back); c != 0 {
				t.Fatalf("cp down: %s", e)
			}
			if b, _ := os.ReadFile(back); string(b) != "a,b\n1,2\n" {
				t.Errorf("round trip: %q", b)
			}

			out, _, _ = d.cli(t, "", "ls")
			if !strings.Contains(out, id) || !strings.Contains(out, "ID") {
				t.Errorf("ls table: %q", out)
			}
			out, _, _ = d.cli(t, "", "ls", "--json", "--label", "suite=cli")
			var list api.SandboxList
			if err := json.Unmarshal([]byte(out), &list); err != nil || len(list.Sandboxes) != 1 || list.Sandboxes[0].ID != id {
				t.Errorf("ls --json: %v %q", err, out)
			}
			out, _, _ = d.cli(t, "", "inspect", id)
			var sb api.Sandbox
			if err := json.Unmarshal([]byte(out), &sb); err != nil || sb.Runtime != rt {
				t.Errorf("inspect: %v %q", err, out)
			}
			for i := 0; i < 2; i++ {
				if _, e, c := d.cli(t, "", "rm", id); c != 0 {
					t.Errorf("rm #%d: %s", i+1, e)
				}
			}
			if _, e, c := d.cli(t, "", "exec", id, "--", "true"); c == 0 || !strings.Contains(e, "not found") {
				t.Errorf("exec in removed sandbox: %d %q", c, e)
			}

			out, errOut, code = d.cli(t, "", "run", "--runtime", rt, "--template", "busybox", "--", "sh", "-c", "echo one-shot; exit 5")
			if out != "one-shot\n" || code != 5 {
				t.Errorf("run: %q %q %d", out, errOut, code)
			}
		})
	}
}
