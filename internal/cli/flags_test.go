package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		err  string
	}{
		{in: "90", want: 90 * time.Second},
		{in: "0", want: 0},
		{in: " 30 ", want: 30 * time.Second},
		{in: "1.5", want: 1500 * time.Millisecond},
		{in: "90s", want: 90 * time.Second},
		{in: "15m", want: 15 * time.Minute},
		{in: "1h30m", want: 90 * time.Minute},
		{in: "250ms", want: 250 * time.Millisecond},
		{in: "", err: "empty"},
		{in: "-5", err: "negative"},
		{in: "-1m", err: "negative"},
		{in: "10x", err: `invalid duration "10x"`},
		{in: "soon", err: `invalid duration "soon"`},
		{in: "NaN", err: "invalid duration"},
		{in: "1e300", err: "invalid duration"},
	} {
		got, err := parseDuration(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseDuration(%q) = %v, %v; want error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestCeilSeconds(t *testing.T) {
	for _, tc := range []struct {
		in   time.Duration
		want int64
	}{
		{0, 0}, {time.Millisecond, 1}, {time.Second, 1}, {1500 * time.Millisecond, 2}, {15 * time.Minute, 900},
	} {
		if got := ceilSeconds(tc.in); got != tc.want {
			t.Errorf("ceilSeconds(%v) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestParseKV(t *testing.T) {
	for _, tc := range []struct {
		in      string
		k, v    string
		wantErr bool
	}{
		{in: "A=1", k: "A", v: "1"},
		{in: "A=", k: "A", v: ""},
		{in: "URL=http://x/?a=b", k: "URL", v: "http://x/?a=b"},
		{in: "key with space=v v", k: "key with space", v: "v v"},
		{in: "A", wantErr: true},
		{in: "=1", wantErr: true},
		{in: "", wantErr: true},
	} {
		k, v, err := parseKV(tc.in)
		if tc.wantErr {
			if err == nil {
				t.Errorf("parseKV(%q) = %q, %q; want error", tc.in, k, v)
			} else if !strings.Contains(err.Error(), "KEY=VALUE") {
				t.Errorf("parseKV(%q) error %q should say what is expected", tc.in, err)
			}
			continue
		}
		if err != nil || k != tc.k || v != tc.v {
			t.Errorf("parseKV(%q) = %q, %q, %v; want %q, %q", tc.in, k, v, err, tc.k, tc.v)
		}
	}
}

func TestFlagValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		err  string // substring of the parse error; empty for success
		env  string // kvFlag.String() after parsing
		dur  time.Duration
		rt   string
	}{
		{name: "ok", args: []string{"-e", "A=1", "--env", "B=x=y", "--timeout", "90", "--runtime", "runc"}, env: "A=1,B=x=y", dur: 90 * time.Second, rt: "runc"},
		{name: "later wins", args: []string{"-e", "A=1", "-e", "A=2"}, env: "A=2"},
		{name: "duration", args: []string{"--timeout", "2m"}, dur: 2 * time.Minute},
		{name: "bad env", args: []string{"--env", "NOVALUE"}, err: `invalid argument "NOVALUE" for "-e, --env" flag: expected KEY=VALUE`},
		{name: "bad timeout", args: []string{"--timeout", "soon"}, err: `invalid argument "soon" for "--timeout" flag`},
		{name: "bad runtime", args: []string{"--runtime", "kvm"}, err: `invalid argument "kvm" for "--runtime" flag: must be gvisor or runc`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			fs.SetOutput(&strings.Builder{})
			env := newKVFlag()
			var dur durationFlag
			var rt runtimeFlag
			fs.VarP(env, "env", "e", "")
			fs.Var(&dur, "timeout", "")
			fs.Var(&rt, "runtime", "")
			err := fs.Parse(tc.args)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if env.String() != tc.env || dur.d != tc.dur || rt.v != tc.rt {
				t.Errorf("env=%q dur=%v rt=%q", env.String(), dur.d, rt.v)
			}
			if tc.env == "" && env.Map() != nil {
				t.Errorf("Map() of an unset flag = %v, want nil", env.Map())
			}
		})
	}
}
