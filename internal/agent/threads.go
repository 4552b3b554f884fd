package agent

import (
	"sync"
	"syscall"
)

// ReserveThreads makes the Go runtime create n OS threads now, while pids
// are free. A process that fills the sandbox's pids limit (a fork bomb)
// would otherwise leave the agent unable to create a thread when it next
// needs one, and the Go runtime aborts on that, taking PID 1 and the whole
// sandbox down. Idle threads stay in the runtime's pool and are reused.
func ReserveThreads(n int) {
	var wg sync.WaitGroup
	ts := syscall.Timespec{Nsec: 20e6}
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A blocking syscall makes the runtime hand its P to a new
			// thread, so n of them in parallel leave ~n threads behind.
			syscall.Nanosleep(&ts, nil)
		}()
	}
	wg.Wait()
}
