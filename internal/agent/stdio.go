package agent

import (
	"os"

	"golang.org/x/sys/unix"
)

// DetachStdio points the process's stdin, stdout and stderr at /dev/null.
// The agent, as a sandbox's PID 1, inherits its stdio from the runtime
// that started it: host files (the runtime's output capture) or the
// runtime's own descriptors. Keeping them would hand anything in the
// sandbox that can open /proc/1/fd a way to write to the host outside
// the sandbox's disk limit, so PID 1 drops them before serving.
func DetachStdio() error {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	for fd := 0; fd <= 2; fd++ {
		if err := unix.Dup3(int(null.Fd()), fd, 0); err != nil {
			return err
		}
	}
	return nil
}
