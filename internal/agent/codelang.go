package agent

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/internal/errdefs"
)

// The interpreter drivers. They are sent over the control socket when an
// interpreter starts, so nothing has to be installed in the sandbox's
// root, which may be read-only.
var (
	//go:embed kernels/python_driver.py
	pythonDriver string
	//go:embed kernels/node_driver.js
	nodeDriver string
	//go:embed kernels/bash_driver.sh
	bashDriver string
)

// Bootstraps read a driver from the control socket and run it. The driver
// itself does not go on the command line: ps in the sandbox stays
// readable.
const (
	pythonBootstrap = `import os,json
b=b""
while not b.endswith(b"\n"):
 c=os.read(0,65536)
 if not c:os._exit(0)
 b+=c
exec(compile(json.loads(b),"<airlock-driver>","exec"))`

	// node has no dup(2): sh moves the control socket to fd 3 and gives
	// node /dev/null as stdin.
	nodeShell     = `exec 3<&0 0</dev/null; exec "$0" --expose-internals -e "$1"`
	nodeBootstrap = `const fs=require("fs");let b=Buffer.alloc(0);const c=Buffer.alloc(65536);` +
		`for(;;){const i=b.indexOf(10);if(i>=0){b=b.subarray(0,i);break}` +
		`const n=fs.readSync(3,c);if(!n)process.exit(0);b=Buffer.concat([b,c.subarray(0,n)])}` +
		`require("vm").runInThisContext("(function(require){"+JSON.parse(b.toString())+"\n})",` +
		`{filename:"airlock-driver"})(require)`

	bashBootstrap = `IFS= read -r -d '' __airlock_driver; eval "$__airlock_driver"`
)

// language is how to run one kind of code context.
type language struct {
	name   string
	binary string // the interpreter, looked up in the context's PATH
	// argv starts the driver given the interpreter's and sh's paths.
	argv func(bin, sh string) []string
	env  []string // defaults, before the context's own env
	// preload is sent first on the control socket: the driver's source.
	preload []byte
	// encode turns a run into the driver's command.
	encode func(code string, env map[string]string) ([]byte, error)
	// groupInterrupt interrupts a run by signalling the whole process
	// group at once: bash acts on SIGINT only after its foreground
	// command has exited.
	groupInterrupt bool
}

var languages = map[string]*language{
	api.LanguagePython: {
		name:   api.LanguagePython,
		binary: "python3",
		argv:   func(bin, _ string) []string { return []string{bin, "-c", pythonBootstrap} },
		// Figures render to PNG without a display; the driver captures them.
		env:     []string{"MPLBACKEND=Agg"},
		preload: jsonLine(pythonDriver),
		encode:  encodeJSONRun,
	},
	api.LanguageJavaScript: {
		name:   api.LanguageJavaScript,
		binary: "node",
		argv: func(bin, sh string) []string {
			return []string{sh, "-c", nodeShell, bin, nodeBootstrap}
		},
		preload: jsonLine(nodeDriver),
		encode:  encodeJSONRun,
	},
	api.LanguageBash: {
		name:           api.LanguageBash,
		binary:         "bash",
		argv:           func(bin, _ string) []string { return []string{bin, "--norc", "--noprofile", "-c", bashBootstrap} },
		preload:        append([]byte(bashDriver), 0),
		encode:         encodeBashRun,
		groupInterrupt: true,
	},
}

func lookupLanguage(name string) (*language, error) {
	l, ok := languages[name]
	if !ok {
		return nil, fmt.Errorf("code: unknown language %q (want python, javascript or bash): %w", name, errdefs.ErrInvalidArgument)
	}
	return l, nil
}

func jsonLine(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // a string always encodes
	}
	return append(b, '\n')
}

// encodeJSONRun is the Python and JavaScript drivers' command: one line.
func encodeJSONRun(code string, env map[string]string) ([]byte, error) {
	b, err := json.Marshal(struct {
		Code string            `json:"code"`
		Env  map[string]string `json:"env,omitempty"`
	}{code, env})
	if err != nil {
		return nil, fmt.Errorf("code: encode run: %w", err)
	}
	return append(b, '\n'), nil
}

// encodeBashRun is the bash driver's command: code that exports the run's
// environment (remembering what it replaces), the user's code, and code
// that restores the environment, each NUL-terminated.
func encodeBashRun(code string, env map[string]string) ([]byte, error) {
	var pre, post strings.Builder
	for i, k := range slices.Sorted(maps.Keys(env)) {
		if !isEnvName(k) {
			return nil, fmt.Errorf("code: env name %q is not a valid variable name: %w", k, errdefs.ErrInvalidArgument)
		}
		set, old := fmt.Sprintf("__airlock_set%d", i), fmt.Sprintf("__airlock_old%d", i)
		fmt.Fprintf(&pre, "%s=${%s+x}; %s=${%s-}; export %s=%s\n", set, k, old, k, k, shellQuote(env[k]))
		fmt.Fprintf(&post, "if [ -n \"$%s\" ]; then %s=$%s; else unset %s; fi; unset %s %s\n", set, k, old, k, set, old)
	}
	var b strings.Builder
	for _, part := range []string{pre.String(), code, post.String()} {
		if strings.IndexByte(part, 0) >= 0 {
			return nil, fmt.Errorf("code: contains a NUL byte: %w", errdefs.ErrInvalidArgument)
		}
		b.WriteString(part)
		b.WriteByte(0)
	}
	return []byte(b.String()), nil
}

func isEnvName(k string) bool {
	if k == "" || (k[0] >= '0' && k[0] <= '9') {
		return false
	}
	for _, c := range k {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// shellQuote quotes s for sh in single quotes, closing and reopening them
// around each single quote it contains.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
