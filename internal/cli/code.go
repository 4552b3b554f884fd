package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/airlockdev/airlock/api"
	"github.com/airlockdev/airlock/client"
)

// codeFlags are the flags code and run --lang share.
type codeFlags struct {
	env        *kvFlag
	timeout    durationFlag
	asJSON     bool
	saveImages string
}

func (f *codeFlags) register(fs *pflag.FlagSet, withEnv bool) {
	if withEnv {
		f.env = newKVFlag()
		fs.VarP(f.env, "env", "e", "set an environment variable for this run only (repeatable)")
		fs.Var(&f.timeout, "timeout", "interrupt the code after this long, e.g. 30s or seconds (default: the daemon's, 5m)")
	}
	fs.BoolVar(&f.asJSON, "json", false, "print the structured result as JSON (images base64)")
	fs.StringVar(&f.saveImages, "save-images", "", "write image outputs to this directory and print their paths")
}

func (f *codeFlags) options(lang, contextID string) []client.CodeOption {
	var opts []client.CodeOption
	if lang != "" {
		opts = append(opts, client.WithLanguage(lang))
	}
	if contextID != "" {
		opts = append(opts, client.InContext(contextID))
	}
	if f.timeout.d > 0 {
		opts = append(opts, client.WithCodeTimeout(f.timeout.d))
	}
	if f.env != nil && len(f.env.Map()) > 0 {
		opts = append(opts, client.WithCodeEnv(f.env.Map()))
	}
	return opts
}

// streamTo streams the run's output to the command's stdout and stderr as
// it is produced, unless the result is to be printed as JSON.
func (f *codeFlags) streamTo(cmd *cobra.Command) []client.CodeOption {
	if f.asJSON {
		return nil
	}
	out, errw := cmd.OutOrStdout(), cmd.ErrOrStderr()
	return []client.CodeOption{
		client.OnStdout(func(b []byte) { out.Write(b) }),
		client.OnStderr(func(b []byte) { errw.Write(b) }),
	}
}

// readCode returns the code argument, or stdin for "-".
func readCode(cmd *cobra.Command, args []string) (string, error) {
	code := strings.Join(args, " ")
	if code != "-" {
		return code, nil
	}
	b, err := io.ReadAll(cmd.InOrStdin())
	if err != nil {
		return "", fmt.Errorf("read code from stdin: %w", err)
	}
	return string(b), nil
}

// finishCode prints a run's outcome (streamed output was printed already)
// and fails the command when the code raised, timed out or lost its
// context.
func (f *codeFlags) finishCode(cmd *cobra.Command, res *api.CodeResult) error {
	saved, err := saveImages(f.saveImages, res)
	if err != nil {
		return err
	}
	if f.asJSON {
		if err := printJSON(cmd.OutOrStdout(), res); err != nil {
			return err
		}
	} else {
		printOutputs(cmd.OutOrStdout(), res, saved)
		if e := res.Error; e != nil {
			msg := e.Traceback
			if msg == "" || e.Name == api.CodeErrorTimeout || e.Name == api.CodeErrorContextDied {
				msg = e.Name + ": " + e.Value
			}
			fmt.Fprintln(cmd.ErrOrStderr(), strings.TrimRight(msg, "\n"))
		}
		if res.ContextRestarted {
			fmt.Fprintln(cmd.ErrOrStderr(), "airlock: the context's interpreter had died; this ran in a fresh one (earlier state is gone)")
		}
	}
	if res.Error != nil || res.TimedOut || res.ContextLost {
		return exitCode(1)
	}
	return nil
}

// printOutputs prints each rich output's text, and where its image was
// saved.
func printOutputs(w io.Writer, res *api.CodeResult, saved map[int]string) {
	for i, o := range res.Results {
		if path, ok := saved[i]; ok {
			fmt.Fprintln(w, path)
			continue
		}
		switch {
		case o.PNG != nil || o.JPEG != nil:
			kind := "image/png"
			if o.PNG == nil {
				kind = "image/jpeg"
			}
			fmt.Fprintf(w, "%s [%s, %d bytes: use --save-images DIR or --json]\n", o.Text, kind, len(o.PNG)+len(o.JPEG))
		case o.Text != "":
			fmt.Fprintln(w, o.Text)
		}
	}
}

// saveImages writes the result's images to dir as
// <context>-<run>-<n>.png and returns their paths by result index.
func saveImages(dir string, res *api.CodeResult) (map[int]string, error) {
	saved := map[int]string{}
	if dir == "" {
		return saved, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("save images: %w", err)
	}
	n := 0
	for i, o := range res.Results {
		data, ext := o.PNG, "png"
		if data == nil {
			data, ext = o.JPEG, "jpg"
		}
		if data == nil {
			continue
		}
		n++
		name := fmt.Sprintf("%s-%d-%d.%s", res.ContextID, res.ExecutionCount, n, ext)
		path := filepath.Join(dir, filepath.Base(name))
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return nil, fmt.Errorf("save images: %w", err)
		}
		saved[i] = path
	}
	return saved, nil
}

func newCodeCmd(a *app) *cobra.Command {
	var (
		f         codeFlags
		lang      string
		contextID string
	)
	cmd := &cobra.Command{
		Use:   "code [flags] ID CODE",
		Short: "Run code in a sandbox's stateful Python, JavaScript or Bash context",
		Long: "Run code in a code context of a sandbox: a live interpreter whose variables, imports and\n" +
			"working directory persist between runs. Without --context the code runs in the default\n" +
			"context of its language (python unless --lang says otherwise), created on first use.\n" +
			"stdout and stderr are printed as they are produced, then each result (the value of the\n" +
			"last expression, figures); errors print their traceback and exit 1. CODE - reads stdin.",
		Example: "  airlock code sb-123 'x = 41'\n" +
			"  airlock code sb-123 'x + 1'\n" +
			"  airlock code --save-images out sb-123 'import matplotlib.pyplot as plt; plt.plot([1, 3, 2])'\n" +
			"  airlock code --lang javascript sb-123 'const r = await Promise.resolve(21); r * 2'\n" +
			"  airlock code --json --context ctx-1a2b sb-123 - < analysis.py",
		Args: argsUsage(cobra.MinimumNArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			code, err := readCode(cmd, args[1:])
			if err != nil {
				return err
			}
			sb, err := a.sandbox(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			opts := append(f.options(lang, contextID), f.streamTo(cmd)...)
			res, err := sb.RunCode(cmd.Context(), code, opts...)
			if err != nil {
				return err
			}
			return f.finishCode(cmd, res)
		},
	}
	fs := cmd.Flags()
	f.register(fs, true)
	fs.StringVarP(&lang, "lang", "l", "", "language: python, javascript or bash (default: python, or the context's)")
	fs.StringVarP(&contextID, "context", "c", "", "context to run in (default: the language's default context)")
	fs.SetInterspersed(false)
	return cmd
}

// runCodeOnce is `airlock run --lang`: the arguments are code, run in a
// fresh sandbox's default context.
func runCodeOnce(cmd *cobra.Command, a *app, sreq api.CreateSandboxRequest, lang string, ef *execFlags, f *codeFlags, args []string) error {
	if ef.cwd != "" || ef.user != "" || ef.shell || ef.stdin {
		return usagef("--cwd, --user, --shell and --stdin do not apply with --lang")
	}
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		return usagef("no code given")
	}
	code, err := readCode(cmd, args)
	if err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	f.env, f.timeout = ef.env, ef.timeout
	opts := append(f.options(lang, ""), f.streamTo(cmd)...)
	res, err := c.RunCode(cmd.Context(), sreq, code, opts...)
	if err != nil {
		return err
	}
	return f.finishCode(cmd, &res.CodeResult)
}
