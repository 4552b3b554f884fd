package agent

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func threadCount(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	t.Fatal("no Threads line")
	return 0
}

func TestReserveThreads(t *testing.T) {
	before := threadCount(t)
	ReserveThreads(16)
	if after := threadCount(t); after < before+8 && after < 16 {
		t.Errorf("threads %d -> %d, want the pool to grow towards 16", before, after)
	}
}
