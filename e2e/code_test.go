package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/client"
)

func requireBase(t *testing.T) {
	t.Helper()
	if !haveBase {
		t.Skip("base template not built (AIRLOCK_TEST_BASE=0)")
	}
}

// pngSize decodes a PNG and returns its size as "WxH".
func pngSize(t *testing.T, b []byte) string {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("decode png (%d bytes): %v", len(b), err)
	}
	s := img.Bounds().Size()
	return fmt.Sprintf("%dx%d", s.X, s.Y)
}

func mainText(res *api.CodeResult) string {
	for _, o := range res.Results {
		if o.IsMainResult {
			return o.Text
		}
	}
	return ""
}

func TestCode(t *testing.T) {
	requireBase(t)
	d := startDaemon(t, "")
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt, Template: "base"})
			ctx := testCtx(t, 5*time.Minute)
			run := func(code string, opts ...client.CodeOption) *api.CodeResult {
				t.Helper()
				res, err := sb.RunCode(ctx, code, opts...)
				if err != nil {
					t.Fatalf("run %q: %v", code, err)
				}
				return res
			}

			t.Run("python state", func(t *testing.T) {
				run("x = 41\ndef inc(v):\n    return v + 1")
				res := run("print('x is', x)\ninc(x)")
				if res.Stdout != "x is 41\n" || mainText(res) != "42" || res.Error != nil {
					t.Errorf("got stdout %q value %q error %+v", res.Stdout, mainText(res), res.Error)
				}
				if res.ContextID != "default-python" || res.ExecutionCount != 2 {
					t.Errorf("context %q count %d", res.ContextID, res.ExecutionCount)
				}
			})
			t.Run("javascript state", func(t *testing.T) {
				js := client.WithLanguage(api.LanguageJavaScript)
				run("let n = 20; function dbl(v) { return v * 2 }", js)
				res := run("const m = await Promise.resolve(1); console.log('n', n); dbl(n) + m", js)
				if res.Stdout != "n 20\n" || mainText(res) != "41" || res.Error != nil {
					t.Errorf("got stdout %q value %q error %+v stderr %q", res.Stdout, mainText(res), res.Error, res.Stderr)
				}
			})
			t.Run("bash state", func(t *testing.T) {
				sh := client.WithLanguage(api.LanguageBash)
				run("greeting=hello; mkdir -p /tmp/work && cd /tmp/work", sh)
				res := run(`echo "$greeting from $PWD"`, sh)
				if res.Stdout != "hello from /tmp/work\n" || res.Error != nil {
					t.Errorf("got %q error %+v", res.Stdout, res.Error)
				}
			})
			t.Run("matplotlib png", func(t *testing.T) {
				res := run("import matplotlib.pyplot as plt\nfig = plt.figure(figsize=(4, 3), dpi=50)\nplt.plot([1, 3, 2])\nplt.show()")
				var sizes []string
				for _, o := range res.Results {
					if o.PNG != nil {
						sizes = append(sizes, pngSize(t, o.PNG))
					}
				}
				if strings.Join(sizes, ",") != "200x150" || res.Error != nil {
					t.Errorf("images %v, error %+v, stderr %q", sizes, res.Error, res.Stderr)
				}
			})
			t.Run("pandas html", func(t *testing.T) {
				res := run("import pandas as pd\npd.DataFrame({'city': ['Oslo', 'Lima'], 'pop': [0.7, 10.0]})")
				if len(res.Results) != 1 || !strings.Contains(res.Results[0].HTML, "<table") ||
					!strings.Contains(res.Results[0].HTML, "Lima") || !strings.Contains(res.Results[0].Text, "Oslo") {
					t.Errorf("results %+v error %+v", res.Results, res.Error)
				}
			})
			t.Run("timeout keeps state", func(t *testing.T) {
				run("kept = 'still here'")
				began := time.Now()
				res := run("while True:\n    pass", client.WithCodeTimeout(time.Second))
				if took := time.Since(began); took > 5*time.Second {
					t.Errorf("interrupt took %s", took)
				}
				if !res.TimedOut || res.ContextLost || res.Error == nil || res.Error.Name != api.CodeErrorTimeout {
					t.Fatalf("result %+v", res)
				}
				if res := run("kept"); mainText(res) != "'still here'" {
					t.Errorf("after timeout: %q", mainText(res))
				}
			})
			t.Run("timeouts in javascript and bash", func(t *testing.T) {
				for _, tc := range []struct{ lang, set, loop, get, want string }{
					{api.LanguageJavaScript, "var kept = 3", "while (true) {}", "kept", "3"},
					{api.LanguageBash, "kept=3", "sleep 60; echo not-reached", "echo $kept", "3\n"},
				} {
					lang := client.WithLanguage(tc.lang)
					run(tc.set, lang)
					began := time.Now()
					res := run(tc.loop, lang, client.WithCodeTimeout(time.Second))
					if took := time.Since(began); took > 5*time.Second || !res.TimedOut || res.ContextLost {
						t.Errorf("%s: took %s, result %+v", tc.lang, took, res)
					}
					if res := run(tc.get, lang); res.Stdout+mainText(res) != tc.want {
						t.Errorf("%s after timeout: %q %q", tc.lang, res.Stdout, mainText(res))
					}
				}
			})
			t.Run("structured error", func(t *testing.T) {
				res := run("a = 1\nb = a / 0\n")
				e := res.Error
				if e == nil || e.Name != "ZeroDivisionError" || e.Value != "division by zero" ||
					!strings.Contains(e.Traceback, "line 2") || !strings.Contains(e.Traceback, "b = a / 0") {
					t.Errorf("error %+v", e)
				}
			})
			t.Run("context lost", func(t *testing.T) {
				run("doomed = 1")
				res := run("import os\nos._exit(3)")
				if !res.ContextLost || res.Error == nil || res.Error.Name != api.CodeErrorContextDied ||
					!strings.Contains(res.Error.Value, "exit code 3") {
					t.Fatalf("result %+v", res)
				}
				res = run("'doomed' in globals()")
				if !res.ContextRestarted || mainText(res) != "False" || res.ExecutionCount != 1 {
					t.Errorf("next run: restarted %v value %q count %d", res.ContextRestarted, mainText(res), res.ExecutionCount)
				}
			})
			t.Run("contexts", func(t *testing.T) {
				cc, err := sb.CreateContext(ctx, api.CreateContextRequest{Cwd: "/tmp", Env: map[string]string{"MODE": "ctx"}})
				if err != nil {
					t.Fatal(err)
				}
				res := run("import os\n(os.getcwd(), os.environ['MODE'], 'x' in globals())", client.InContext(cc.ID))
				if mainText(res) != "('/tmp', 'ctx', False)" {
					t.Errorf("in context: %q %+v", mainText(res), res.Error)
				}
				var streamed []string
				res = run("print('a'); import sys; print('b', file=sys.stderr); 3", client.InContext(cc.ID),
					client.OnStdout(func(b []byte) { streamed = append(streamed, "out:"+string(b)) }),
					client.OnStderr(func(b []byte) { streamed = append(streamed, "err:"+string(b)) }),
					client.OnResult(func(o api.CodeOutput) { streamed = append(streamed, "result:"+o.Text) }))
				if got := strings.Join(streamed, "|"); got != "out:a\n|err:b\n|result:3" || res.Stdout != "a\n" || mainText(res) != "3" {
					t.Errorf("streamed %q, result %+v", got, res)
				}
				list, err := sb.ListContexts(ctx)
				if err != nil || len(list) < 3 {
					t.Errorf("list: %+v %v", list, err)
				}
				if _, err := sb.RestartContext(ctx, cc.ID); err != nil {
					t.Error(err)
				}
				if err := sb.DeleteContext(ctx, cc.ID); err != nil {
					t.Error(err)
				}
				if _, err := sb.RunCode(ctx, "1", client.InContext(cc.ID)); !errors.Is(err, client.ErrNotFound) {
					t.Errorf("run in deleted context: %v", err)
				}
			})
		})
	}
}

func TestCodeCLI(t *testing.T) {
	requireBase(t)
	d := startDaemon(t, "")
	rt := runtimes(t)[0]
	out, errOut, code := d.cli(t, "", "create", "--runtime", rt, "--template", "base")
	id := strings.TrimSpace(out)
	if code != 0 {
		t.Fatalf("create: %q %q", out, errOut)
	}
	defer d.cli(t, "", "rm", id)

	if out, errOut, code = d.cli(t, "", "code", id, "x = 6"); code != 0 || out != "" {
		t.Fatalf("code: %q %q %d", out, errOut, code)
	}
	out, _, code = d.cli(t, "print('seven')\nx * 7\n", "code", id, "-")
	if out != "seven\n42\n" || code != 0 {
		t.Errorf("code from stdin: %q %d", out, code)
	}
	_, errOut, code = d.cli(t, "", "code", id, "1/0")
	if code != 1 || !strings.Contains(errOut, "ZeroDivisionError") {
		t.Errorf("error: %q %d", errOut, code)
	}

	dir := t.TempDir()
	out, errOut, code = d.cli(t, "", "code", "--save-images", dir, id,
		"import matplotlib.pyplot as plt\nplt.figure(figsize=(4, 3), dpi=50)\nplt.plot([1, 2])\nplt.show()")
	if code != 0 {
		t.Fatalf("save images: %q %q", out, errOut)
	}
	path := strings.TrimSpace(out)
	b, err := os.ReadFile(path)
	if err != nil || filepath.Dir(path) != dir {
		t.Fatalf("saved image %q: %v", path, err)
	}
	if got := pngSize(t, b); got != "200x150" {
		t.Errorf("saved image is %s", got)
	}

	out, _, code = d.cli(t, "", "code", "--json", "--lang", "bash", id, "echo hi; false")
	var res api.CodeResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Stdout != "hi\n" || res.Error == nil ||
		res.Error.Name != api.CodeErrorExitStatus || code != 1 {
		t.Errorf("--json: %v %q %d", err, out, code)
	}

	ctxID, errOut, code := d.cli(t, "", "context", "create", "--lang", "javascript", id)
	ctxID = strings.TrimSpace(ctxID)
	if code != 0 || !strings.HasPrefix(ctxID, "ctx-") {
		t.Fatalf("context create: %q %q", ctxID, errOut)
	}
	d.cli(t, "", "code", "--context", ctxID, id, "var k = 5")
	if out, _, _ = d.cli(t, "", "code", "--context", ctxID, id, "k * 2"); out != "10\n" {
		t.Errorf("javascript context: %q", out)
	}
	if out, _, _ = d.cli(t, "", "context", "ls", id); !strings.Contains(out, ctxID) || !strings.Contains(out, "default-python") {
		t.Errorf("context ls: %q", out)
	}
	if _, errOut, code = d.cli(t, "", "context", "restart", id, ctxID); code != 0 {
		t.Errorf("context restart: %q", errOut)
	}
	if _, errOut, code = d.cli(t, "", "context", "rm", id, ctxID); code != 0 {
		t.Errorf("context rm: %q", errOut)
	}

	out, errOut, code = d.cli(t, "", "run", "--runtime", rt, "--lang", "python", "import sys; print('one-shot'); sys.version_info[0]")
	if out != "one-shot\n3\n" || code != 0 {
		t.Errorf("run --lang: %q %q %d", out, errOut, code)
	}
}

// TestRunCodeLatency measures a trivial run in a warm Python context and
// the first result of a fresh context. It only runs with AIRLOCK_BENCH=1:
//
//	AIRLOCK_BENCH=1 go test -count=1 -v -run TestRunCodeLatency ./e2e/
func TestRunCodeLatency(t *testing.T) {
	if os.Getenv("AIRLOCK_BENCH") != "1" {
		t.Skip("set AIRLOCK_BENCH=1 to measure code run latency")
	}
	requireBase(t)
	d := startDaemon(t, "")
	for _, rt := range runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := d.newSandbox(t, api.CreateSandboxRequest{Runtime: rt, Template: "base"})
			ctx := testCtx(t, 5*time.Minute)
			began := time.Now()
			cc, err := sb.CreateContext(ctx, api.CreateContextRequest{})
			if err != nil {
				t.Fatal(err)
			}
			created := time.Since(began)
			res, err := sb.RunCode(ctx, "1+1", client.InContext(cc.ID))
			if err != nil || mainText(res) != "2" {
				t.Fatalf("first run: %v %+v", err, res)
			}
			first := time.Since(began)
			var warm []time.Duration
			for range 20 {
				t0 := time.Now()
				res, err := sb.RunCode(ctx, "1+1", client.InContext(cc.ID))
				if err != nil || mainText(res) != "2" {
					t.Fatalf("run: %v %+v", err, res)
				}
				warm = append(warm, time.Since(t0))
			}
			began = time.Now()
			if _, err := sb.RunCode(ctx, "import matplotlib.pyplot as plt; plt.plot([1]); plt.show()", client.InContext(cc.ID)); err != nil {
				t.Fatal(err)
			}
			plot := time.Since(began)
			t.Logf("%s: create context %s, first result %s, warm 1+1 median %s (min %s, max %s), first matplotlib figure %s",
				rt, created.Round(time.Millisecond), first.Round(time.Millisecond), median(warm), slices.Min(warm).Round(10*time.Microsecond), slices.Max(warm).Round(10*time.Microsecond), plot.Round(time.Millisecond))
		})
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(10 * time.Microsecond)
}
