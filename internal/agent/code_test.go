package agent

import (
	"bytes"
	"context"
	"image/png"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/agentproto"
)

// codeRun is a finished run as a test sees it.
type codeRun struct {
	ctx     api.CodeContext
	stdout  string
	stderr  string
	results []api.CodeOutput
	end     agentproto.CodeEnd
}

func (r codeRun) main() string {
	for _, o := range r.results {
		if o.IsMainResult {
			return o.Text
		}
	}
	return ""
}

func runCode(t *testing.T, c *agentproto.Client, req agentproto.CodeRequest) codeRun {
	t.Helper()
	r, err := tryRunCode(t, c, req)
	if err != nil {
		t.Fatalf("run %q: %v", req.Code, err)
	}
	return r
}

func tryRunCode(t *testing.T, c *agentproto.Client, req agentproto.CodeRequest) (codeRun, error) {
	t.Helper()
	var r codeRun
	var out, errb bytes.Buffer
	end, err := c.RunCode(testCtx(t), req, agentproto.CodeIO{
		Stdout: &out, Stderr: &errb,
		OnContext: func(ctx api.CodeContext) { r.ctx = ctx },
		OnResult:  func(o api.CodeOutput) error { r.results = append(r.results, o); return nil },
	})
	r.stdout, r.stderr, r.end = out.String(), errb.String(), end
	return r, err
}

// codeClient starts an agent and deletes its contexts when the test ends,
// so no interpreter outlives it.
func codeClient(t *testing.T) *agentproto.Client {
	t.Helper()
	c := newClient(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		list, err := c.ListContexts(ctx)
		if err != nil {
			t.Errorf("list contexts: %v", err)
		}
		for _, cc := range list {
			if err := c.DeleteContext(ctx, cc.ID); err != nil {
				t.Errorf("delete context %s: %v", cc.ID, err)
			}
		}
	})
	return c
}

func needBinary(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s is not installed", name)
	}
}

func needPython(t *testing.T, modules ...string) {
	t.Helper()
	needBinary(t, "python3")
	for _, m := range modules {
		// The agent finds python3 in its default PATH, /usr/bin first.
		if exec.Command("/usr/bin/python3", "-c", "import "+m).Run() != nil {
			t.Skipf("python module %s is not installed", m)
		}
	}
}

func TestCodeStatePersists(t *testing.T) {
	tests := []struct {
		lang, binary string
		runs         []string
		want         string // stdout + main result of the last run
	}{
		{api.LanguagePython, "python3", []string{"x = 41", "def f(v):\n    return v + 1", "print('got', f(x))\nf(x)"}, "got 42\n42"},
		{api.LanguageJavaScript, "node", []string{"let x = 41", "function f(v) { return v + 1 }", "console.log('got', f(x)); f(x)"}, "got 42\n42"},
		{api.LanguageJavaScript, "node", []string{"const y = await Promise.resolve(20)", "y * 2"}, "40"},
		{api.LanguageBash, "bash", []string{"x=42; cd /tmp", "f() { echo \"got $x in $PWD\"; }", "f"}, "got 42 in /tmp\n"},
	}
	for _, tt := range tests {
		t.Run(tt.lang, func(t *testing.T) {
			needBinary(t, tt.binary)
			c := codeClient(t)
			var last codeRun
			for _, code := range tt.runs {
				last = runCode(t, c, agentproto.CodeRequest{Language: tt.lang, Code: code})
				if last.end.Error != nil {
					t.Fatalf("run %q: error %+v (stderr %q)", code, last.end.Error, last.stderr)
				}
			}
			if got := last.stdout + last.main(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if last.ctx.ID != "default-"+tt.lang || !last.ctx.Default {
				t.Errorf("context %+v, want the default one", last.ctx)
			}
			if last.end.ExecutionCount != len(tt.runs) {
				t.Errorf("execution count %d, want %d", last.end.ExecutionCount, len(tt.runs))
			}
		})
	}
}

func TestCodeErrors(t *testing.T) {
	tests := []struct {
		lang, binary, code string
		name, inTraceback  string
	}{
		{api.LanguagePython, "python3", "a = 1\nb = a / 0", "ZeroDivisionError", "b = a / 0"},
		{api.LanguagePython, "python3", "def f(:", "SyntaxError", "def f(:"},
		{api.LanguagePython, "python3", "import sys; sys.exit(3)", "SystemExit", "sys.exit(3)"},
		{api.LanguageJavaScript, "node", "null.x", "TypeError", "<cell 1>:1"},
		{api.LanguageJavaScript, "node", "function g( {", "SyntaxError", "function g( {"},
		{api.LanguageBash, "bash", "ls /nonexistent", api.CodeErrorExitStatus, ""},
	}
	for _, tt := range tests {
		t.Run(tt.lang+"/"+tt.name, func(t *testing.T) {
			needBinary(t, tt.binary)
			c := codeClient(t)
			r := runCode(t, c, agentproto.CodeRequest{Language: tt.lang, Code: tt.code})
			if r.end.Error == nil || r.end.Error.Name != tt.name {
				t.Fatalf("error %+v, want %s", r.end.Error, tt.name)
			}
			if !strings.Contains(r.end.Error.Traceback, tt.inTraceback) {
				t.Errorf("traceback %q does not mention %q", r.end.Error.Traceback, tt.inTraceback)
			}
			if strings.Contains(r.end.Error.Traceback, "airlock-driver") {
				t.Errorf("traceback shows the driver: %q", r.end.Error.Traceback)
			}
			// The context survives its code's errors.
			if r := runCode(t, c, agentproto.CodeRequest{Language: tt.lang, Code: "echo=1"}); r.end.ContextLost {
				t.Errorf("context lost after an error")
			}
		})
	}
}

func TestCodeTimeoutInterrupts(t *testing.T) {
	tests := []struct {
		lang, binary, set, loop, get, want string
	}{
		{api.LanguagePython, "python3", "x = 7", "while True: pass", "x", "7"},
		{api.LanguagePython, "python3", "x = 7", "import os; os.system('sleep 30')", "x", "7"},
		{api.LanguageJavaScript, "node", "var x = 7", "while (true) {}", "x", "7"},
		{api.LanguageJavaScript, "node", "var x = 7", "await new Promise(() => {})", "x", "7"},
		{api.LanguageBash, "bash", "x=7", "sleep 30; echo not-reached", "echo $x", "7\n"},
		{api.LanguageBash, "bash", "x=7", "while :; do :; done", "echo $x", "7\n"},
	}
	for _, tt := range tests {
		t.Run(tt.lang+"/"+tt.loop, func(t *testing.T) {
			needBinary(t, tt.binary)
			c := codeClient(t)
			runCode(t, c, agentproto.CodeRequest{Language: tt.lang, Code: tt.set})
			began := time.Now()
			r := runCode(t, c, agentproto.CodeRequest{Language: tt.lang, Code: tt.loop, TimeoutMS: 300})
			if took := time.Since(began); took > 2*time.Second {
				t.Errorf("interrupting took %s", took)
			}
			if !r.end.TimedOut || r.end.ContextLost || r.end.Error == nil || r.end.Error.Name != api.CodeErrorTimeout {
				t.Fatalf("end %+v, want timed out with the context kept", r.end)
			}
			if strings.Contains(r.stdout, "not-reached") {
				t.Errorf("the rest of the code ran after the interrupt: %q", r.stdout)
			}
			r = runCode(t, c, agentproto.CodeRequest{Language: tt.lang, Code: tt.get})
			if got := r.stdout + r.main(); got != tt.want {
				t.Errorf("after the timeout got %q, want %q (end %+v)", got, tt.want, r.end)
			}
		})
	}
}

func TestCodeContextDeath(t *testing.T) {
	tests := []struct{ lang, binary, set, die, get string }{
		{api.LanguagePython, "python3", "x = 1", "print('bye', flush=True); import os; os._exit(3)", "'x' in globals()"},
		{api.LanguageJavaScript, "node", "var x = 1", "console.log('bye'); process.exit(3)", "typeof x !== 'undefined'"},
		{api.LanguageBash, "bash", "x=1", "echo bye; exit 3", "echo ${x:-false}"},
	}
	for _, tt := range tests {
		t.Run(tt.lang, func(t *testing.T) {
			needBinary(t, tt.binary)
			c := codeClient(t)
			runCode(t, c, agentproto.CodeRequest{Language: tt.lang, Code: tt.set})
			r := runCode(t, c, agentproto.CodeRequest{Language: tt.lang, Code: tt.die})
			if !r.end.ContextLost || r.end.Error == nil || r.end.Error.Name != api.CodeErrorContextDied {
				t.Fatalf("end %+v, want the context lost", r.end)
			}
			if !strings.Contains(r.end.Error.Value, "exit code 3") || r.stdout != "bye\n" {
				t.Errorf("error %q, stdout %q", r.end.Error.Value, r.stdout)
			}
			r = runCode(t, c, agentproto.CodeRequest{Language: tt.lang, Code: tt.get})
			if !r.end.ContextRestarted || r.end.ContextLost || r.end.ExecutionCount != 1 {
				t.Errorf("end %+v, want a restarted context", r.end)
			}
			if got := strings.TrimSpace(r.stdout + r.main()); got != "False" && got != "false" {
				t.Errorf("state after restart: %q, want it gone", got)
			}
		})
	}
}

func TestCodePythonRichOutputs(t *testing.T) {
	needPython(t)
	c := codeClient(t)
	r := runCode(t, c, agentproto.CodeRequest{Code: `
class Rich:
    def _repr_html_(self): return "<b>rich</b>"
    def _repr_json_(self): return {"a": 1}
    def __repr__(self): return "Rich()"
Rich()`})
	if len(r.results) != 1 {
		t.Fatalf("results %+v", r.results)
	}
	o := r.results[0]
	if o.Text != "Rich()" || o.HTML != "<b>rich</b>" || string(o.JSON) != `{"a":1}` || !o.IsMainResult {
		t.Errorf("output %+v", o)
	}
	r = runCode(t, c, agentproto.CodeRequest{Code: "import os\nos.system('echo from-subprocess')\nprint('from-print')\nNone"})
	if r.stdout != "from-subprocess\nfrom-print\n" || len(r.results) != 0 {
		t.Errorf("stdout %q results %+v", r.stdout, r.results)
	}
	r = runCode(t, c, agentproto.CodeRequest{Code: "import os; os.environ.get('RUN_ONLY')", RunEnv: map[string]string{"RUN_ONLY": "yes"}})
	if r.main() != "'yes'" {
		t.Errorf("run env: %q", r.main())
	}
	if r = runCode(t, c, agentproto.CodeRequest{Code: "import os; os.environ.get('RUN_ONLY')"}); r.main() != "" {
		t.Errorf("run env outlived its run: %q", r.main())
	}
}

func TestCodePythonFigures(t *testing.T) {
	needPython(t, "matplotlib", "pandas")
	c := codeClient(t)
	r := runCode(t, c, agentproto.CodeRequest{Code: `
import matplotlib.pyplot as plt
plt.figure(figsize=(4, 3), dpi=50); plt.plot([1, 2])
plt.show()
print("between")
plt.figure(figsize=(2, 1), dpi=100); plt.plot([2, 1])
7`})
	if r.end.Error != nil {
		t.Fatalf("error %+v", r.end.Error)
	}
	var sizes []string
	for _, o := range r.results {
		if o.PNG == nil {
			sizes = append(sizes, "value "+o.Text)
			continue
		}
		img, err := png.Decode(bytes.NewReader(o.PNG))
		if err != nil {
			t.Fatalf("decode png: %v", err)
		}
		sizes = append(sizes, img.Bounds().Size().String())
	}
	// plt.show() emits the first figure; the value comes before the
	// figures still open at the end, as in a notebook.
	if got := strings.Join(sizes, ", "); got != "(200,150), value 7, (200,100)" {
		t.Errorf("outputs %s", got)
	}
	r = runCode(t, c, agentproto.CodeRequest{Code: "import pandas as pd\npd.DataFrame({'a': [1, 2]})"})
	if len(r.results) != 1 || !strings.Contains(r.results[0].HTML, "<table") || !strings.Contains(r.results[0].Text, "a") {
		t.Errorf("dataframe outputs %+v", r.results)
	}
}
