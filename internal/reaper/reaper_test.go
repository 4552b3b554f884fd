package reaper

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestReapsOrphansNotOwnChildren runs in a child process, because being a
// subreaper changes the whole test binary.
func TestReapsOrphansNotOwnChildren(t *testing.T) {
	if os.Getenv("REAPER_CHILD") == "1" {
		childMain(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReapsOrphansNotOwnChildren$", "-test.v")
	cmd.Env = append(os.Environ(), "REAPER_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func childMain(t *testing.T) {
	if err := Enable(); err != nil {
		t.Skipf("cannot become a subreaper: %v", err)
	}
	// Many short commands of our own: the reaper must never steal their
	// exit status from Wait.
	for i := 0; i < 50; i++ {
		if err := Run(exec.Command("sh", "-c", "exit 3")); err == nil || err.(*exec.ExitError).ExitCode() != 3 {
			t.Fatalf("run %d: %v, want exit status 3", i, err)
		}
	}
	// An orphan: sh starts sleep in the background and exits, so sleep is
	// reparented to us; once killed it must be reaped promptly.
	out, err := Output(exec.Command("sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	if err := unixKill(pid); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphan %d not reaped", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func unixKill(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}
