package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// humanDuration renders d compactly, rounded to its largest unit or two:
// 45s, 13m, 2h5m, 3d.
func humanDuration(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	if d = d.Round(time.Second); d < time.Minute {
		return fmt.Sprintf("%ds", int(d/time.Second))
	}
	if d = d.Round(time.Minute); d < time.Hour {
		return fmt.Sprintf("%dm", int(d/time.Minute))
	}
	if d < 24*time.Hour {
		h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
		if m == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m)
	}
	return fmt.Sprintf("%dd", int(d.Round(time.Hour)/(24*time.Hour)))
}

// ago renders a past time relative to now, e.g. "2m ago".
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	if d < time.Second {
		return "just now"
	}
	return humanDuration(d) + " ago"
}

// expiresIn renders an expiry relative to now, e.g. "in 13m".
func expiresIn(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := t.Sub(now)
	if d <= 0 {
		return "expired"
	}
	return "in " + humanDuration(d)
}

// formatLabels renders labels as sorted k=v pairs joined by commas.
func formatLabels(labels map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ",")
}

// humanMB renders a byte count in megabytes (10^6 bytes).
func humanMB(n int64) string {
	mb := float64(n) / 1e6
	if mb < 10 {
		return fmt.Sprintf("%.1f MB", mb)
	}
	return fmt.Sprintf("%.0f MB", mb)
}
