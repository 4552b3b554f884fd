package cli

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// parseDuration parses a Go duration ("90s", "15m", "1h30m") or a bare
// number of seconds ("90", "1.5"). Negative durations are refused.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty duration")
	}
	var d time.Duration
	if secs, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(secs) || math.IsInf(secs, 0) || secs > float64(math.MaxInt64/int64(time.Second)) {
			return 0, fmt.Errorf("invalid duration %q", s)
		}
		d = time.Duration(secs * float64(time.Second))
	} else {
		d, err = time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("invalid duration %q: want seconds (90) or a duration like 90s, 15m, 1h30m", s)
		}
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q is negative", s)
	}
	return d, nil
}

// ceilSeconds rounds a duration up to whole seconds, for the API's
// integer timeout fields.
func ceilSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

// parseKV splits KEY=VALUE. The value may be empty or contain '='; the key
// may not be empty.
func parseKV(s string) (string, string, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return "", "", fmt.Errorf("expected KEY=VALUE, got %q", s)
	}
	return k, v, nil
}

// kvFlag is a repeatable KEY=VALUE flag collected into a map. pflag
// reports a bad value as: invalid argument "X" for "--env" flag: ...
type kvFlag struct{ m map[string]string }

func newKVFlag() *kvFlag { return &kvFlag{m: map[string]string{}} }

func (f *kvFlag) Set(s string) error {
	k, v, err := parseKV(s)
	if err != nil {
		return err
	}
	f.m[k] = v
	return nil
}

func (f *kvFlag) String() string {
	if f == nil || len(f.m) == 0 {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(f.m)) {
		parts = append(parts, k+"="+f.m[k])
	}
	return strings.Join(parts, ",")
}

func (f *kvFlag) Type() string { return "KEY=VALUE" }

// Map returns the collected pairs, or nil if there are none.
func (f *kvFlag) Map() map[string]string {
	if len(f.m) == 0 {
		return nil
	}
	return f.m
}

// durationFlag is a duration flag that also accepts bare seconds.
type durationFlag struct{ d time.Duration }

func (f *durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	f.d = d
	return nil
}

func (f *durationFlag) String() string {
	if f == nil || f.d == 0 {
		return ""
	}
	return f.d.String()
}

func (f *durationFlag) Type() string { return "duration" }

// runtimeFlag validates --runtime early, with a clear message.
type runtimeFlag struct{ v string }

func (f *runtimeFlag) Set(s string) error {
	switch s {
	case "gvisor", "runc":
		f.v = s
		return nil
	}
	return fmt.Errorf("must be gvisor or runc")
}

func (f *runtimeFlag) String() string { return f.v }
func (f *runtimeFlag) Type() string   { return "gvisor|runc" }
