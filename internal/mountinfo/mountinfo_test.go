package mountinfo

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	mi := "22 27 0:21 / /proc rw - proc proc rw\n" +
		"40 27 0:21 / /d/.build-base-1/rootfs/proc rw - proc proc rw\n" +
		"41 40 0:22 / /d/.build-base-1/rootfs/proc/sys/fs/binfmt_misc rw - x x rw\n" +
		"42 27 0:23 / /d/.build-base-1/rootfs/my\\040dir rw - tmpfs t rw\n" +
		"43 27 0:23 / /d/.build-base-10 rw - tmpfs t rw\n"
	got := parse(mi, "/d/.build-base-1")
	want := []string{
		"/d/.build-base-1/rootfs/proc/sys/fs/binfmt_misc",
		"/d/.build-base-1/rootfs/my dir",
		"/d/.build-base-1/rootfs/proc",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("parse = %q, want %q", got, want)
	}
}
