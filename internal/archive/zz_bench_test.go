package archive

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestZZBench(t *testing.T) {
	src := t.TempDir()
	b := make([]byte, 1<<20)
	for i := range 90 {
		os.MkdirAll(filepath.Join(src, "big", fmt.Sprint(i%5)), 0o755)
		os.WriteFile(filepath.Join(src, "big", fmt.Sprint(i%5), fmt.Sprint(i)), b, 0o644)
	}
	for i := range 2560 {
		os.MkdirAll(filepath.Join(src, "small", fmt.Sprint(i%16)), 0o755)
		os.WriteFile(filepath.Join(src, "small", fmt.Sprint(i%16), fmt.Sprint(i)), b[:4096], 0o644)
	}
	for k := 0; k < 3; k++ {
		start := time.Now()
		pr, pw := io.Pipe()
		go func() { _, err := Write(context.Background(), pw, src, WriteOptions{}); pw.CloseWithError(err) }()
		res, err := Extract(context.Background(), pr, filepath.Join(t.TempDir(), "dst"), ExtractOptions{})
		t.Logf("%+v %v in %v", res, err, time.Since(start))
	}
}
