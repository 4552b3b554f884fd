package e2e

import (
	"bytes"
	"errors"
	"syscall"
	"testing"
)

// checkSysrq asserts no probe's write to /proc/sysrq-trigger reached the
// host kernel: a sysrq command, even "h" (help), logs a "sysrq:" line.
func (h *escapeHost) checkSysrq(t *testing.T) {
	if got := hostSysrqLines(t); got != h.sysrqLines {
		t.Errorf("ESCAPE: host kernel log gained %d sysrq lines during the probes", got-h.sysrqLines)
	}
}

// hostSysrqLines counts the host kernel log records that mention sysrq,
// reading /dev/kmsg without blocking (one record per read). Raw syscalls:
// an os.File would park a read of this pollable device in the poller.
func hostSysrqLines(t *testing.T) int {
	fd, err := syscall.Open("/dev/kmsg", syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("read host kernel log: %v", err)
	}
	defer syscall.Close(fd)
	n, buf := 0, make([]byte, 8192)
	for {
		k, err := syscall.Read(fd, buf)
		switch {
		case errors.Is(err, syscall.EAGAIN):
			return n
		case errors.Is(err, syscall.EPIPE):
			continue // records overwritten while reading
		case err != nil:
			t.Fatalf("read host kernel log: %v", err)
		}
		if bytes.Contains(bytes.ToLower(buf[:k]), []byte("sysrq")) {
			n++
		}
	}
}
