package agent

import (
	"bufio"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/agentproto"
	"github.com/airlockdev/airlock/internal/errdefs"
)

func TestCodeContexts(t *testing.T) {
	needBinary(t, "python3")
	c := codeClient(t)
	ctx := testCtx(t)
	cc, err := c.CreateContext(ctx, agentproto.CodeRequest{Language: api.LanguagePython, Cwd: "/tmp", Env: []string{"CTX_VAR=v1"}})
	if err != nil {
		t.Fatal(err)
	}
	if cc.PID == 0 || cc.Cwd != "/tmp" || cc.User != "root" || cc.Default {
		t.Errorf("context %+v", cc)
	}
	r := runCode(t, c, agentproto.CodeRequest{ContextID: cc.ID, Code: "import os; x = 5; (os.getcwd(), os.environ['CTX_VAR'])"})
	if r.main() != "('/tmp', 'v1')" {
		t.Errorf("got %q", r.main())
	}
	// Runs of one context queue; other contexts do not share state.
	var wg sync.WaitGroup
	outs := make([]string, 2)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := tryRunCode(t, c, agentproto.CodeRequest{ContextID: cc.ID, Code: "import time; time.sleep(0.2); x"})
			if err == nil {
				outs[i] = r.main()
			}
		}()
	}
	wg.Wait()
	if outs[0] != "5" || outs[1] != "5" {
		t.Errorf("concurrent runs: %q", outs)
	}
	if r := runCode(t, c, agentproto.CodeRequest{Code: "'x' in globals()"}); r.main() != "False" {
		t.Errorf("default context sees another context's state: %q", r.main())
	}
	if _, err := tryRunCode(t, c, agentproto.CodeRequest{ContextID: cc.ID, Language: api.LanguageBash, Code: "true"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("run with the wrong language: %v", err)
	}

	re, err := c.RestartContext(ctx, cc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if re.PID == cc.PID || re.PID == 0 {
		t.Errorf("restart kept pid %d", re.PID)
	}
	if r := runCode(t, c, agentproto.CodeRequest{ContextID: cc.ID, Code: "'x' in globals()"}); r.main() != "False" || r.end.ContextRestarted {
		t.Errorf("after restart: %q, end %+v", r.main(), r.end)
	}
	list, err := c.ListContexts(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if err := c.DeleteContext(ctx, cc.ID); err != nil {
		t.Fatal(err)
	}
	waitGone(t, re.PID)
	if err := c.DeleteContext(ctx, cc.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
	if _, err := tryRunCode(t, c, agentproto.CodeRequest{ContextID: cc.ID, Code: "1"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("run in a deleted context: %v", err)
	}
}

func TestCodeBadRequests(t *testing.T) {
	c := codeClient(t)
	ctx := testCtx(t)
	if _, err := c.CreateContext(ctx, agentproto.CodeRequest{Language: "cobol"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("unknown language: %v", err)
	}
	if _, err := c.CreateContext(ctx, agentproto.CodeRequest{Language: api.LanguageBash, Cwd: "/nonexistent"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("missing cwd: %v", err)
	}
	if _, err := c.CreateContext(ctx, agentproto.CodeRequest{Language: api.LanguageBash, User: "nosuchuser"}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("missing user: %v", err)
	}
	// An interpreter that cannot start says why.
	if _, err := exec.LookPath("python3"); err == nil {
		_, err := c.CreateContext(ctx, agentproto.CodeRequest{Env: []string{"PYTHONHOME=/nonexistent"}})
		if err == nil || !strings.Contains(err.Error(), "exited at start") || !strings.Contains(err.Error(), "encodings") {
			t.Errorf("broken python: %v", err)
		}
	}
	if _, err := tryRunCode(t, c, agentproto.CodeRequest{Language: api.LanguageBash, Code: "echo a\x00b"}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("NUL in bash code: %v", err)
	}
	if _, err := tryRunCode(t, c, agentproto.CodeRequest{Language: api.LanguageBash, Code: "true", RunEnv: map[string]string{"A-B": "x"}}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("bad env name: %v", err)
	}
}

func TestCodeBashRunEnv(t *testing.T) {
	needBinary(t, "bash")
	c := codeClient(t)
	runCode(t, c, agentproto.CodeRequest{Language: api.LanguageBash, Code: "KEEP=old"})
	r := runCode(t, c, agentproto.CodeRequest{Language: api.LanguageBash, Code: `echo "$KEEP $NEW"`,
		RunEnv: map[string]string{"KEEP": "it's new", "NEW": "$(echo injected)"}})
	if r.stdout != "it's new $(echo injected)\n" {
		t.Errorf("with run env: %q", r.stdout)
	}
	r = runCode(t, c, agentproto.CodeRequest{Language: api.LanguageBash, Code: `echo "$KEEP ${NEW-unset}"`})
	if r.stdout != "old unset\n" {
		t.Errorf("after the run: %q", r.stdout)
	}
}

func TestReadLimitedLine(t *testing.T) {
	tests := []struct {
		in      string
		max     int
		lines   []string
		dropped []int
	}{
		{"a\nbb\n", 10, []string{"a", "bb"}, []int{0, 0}},
		{"abcdef\nx\n", 3, []string{"", "x"}, []int{7, 0}},
		{"abc\n", 3, []string{"abc"}, []int{0}},
	}
	for _, tt := range tests {
		r := bufioReader(tt.in)
		for i := range tt.lines {
			line, dropped, err := readLimitedLine(r, tt.max)
			if err != nil || string(line) != tt.lines[i] || dropped != tt.dropped[i] {
				t.Errorf("%q line %d: %q, %d, %v", tt.in, i, line, dropped, err)
			}
		}
		if _, _, err := readLimitedLine(r, tt.max); err == nil {
			t.Errorf("%q: no error at the end", tt.in)
		}
	}
}

func bufioReader(s string) *bufio.Reader { return bufio.NewReaderSize(strings.NewReader(s), 16) }
