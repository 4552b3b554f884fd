package agent

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/airlockdev/airlock/internal/errdefs"
)

func TestLookupAccount(t *testing.T) {
	dir := t.TempDir()
	passwd := filepath.Join(dir, "passwd")
	group := filepath.Join(dir, "group")
	os.WriteFile(passwd, []byte(`# comment
root:x:0:0:root:/root:/bin/bash
broken:x:notanumber:0::/:/bin/sh
user:x:1000:1000:Sandbox User:/home/user:/bin/bash
svc:x:999:998::/nonexistent:/usr/sbin/nologin
`), 0o644)
	os.WriteFile(group, []byte(`root:x:0:
user:x:1000:
docker:x:998:svc,user
wheel:x:10:user
audio:x:29: other , user
`), 0o644)

	for _, tc := range []struct {
		name string
		want *account
		err  error
	}{
		{"user", &account{Name: "user", UID: 1000, GID: 1000, Groups: []uint32{1000, 998, 10, 29}, Home: "/home/user", Shell: "/bin/bash"}, nil},
		{"1000", &account{Name: "user", UID: 1000, GID: 1000, Groups: []uint32{1000, 998, 10, 29}, Home: "/home/user", Shell: "/bin/bash"}, nil},
		{"root", &account{Name: "root", UID: 0, GID: 0, Groups: []uint32{0}, Home: "/root", Shell: "/bin/bash"}, nil},
		{"svc", &account{Name: "svc", UID: 999, GID: 998, Groups: []uint32{998}, Home: "/nonexistent", Shell: "/usr/sbin/nologin"}, nil},
		{"4242", &account{Name: "4242", UID: 4242, GID: 4242, Groups: []uint32{4242}, Home: "/"}, nil},
		{"nobody", nil, errdefs.ErrNotFound},
		{"broken", nil, errdefs.ErrNotFound},
		{"", nil, errdefs.ErrInvalidArgument},
	} {
		got, err := lookupAccount(passwd, group, tc.name)
		if !errors.Is(err, tc.err) || (tc.err != nil && err == nil) {
			t.Errorf("%q: err = %v, want %v", tc.name, err, tc.err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q = %+v, want %+v", tc.name, got, tc.want)
		}
	}

	// Without a group file there are no supplementary groups, but the user
	// still resolves.
	got, err := lookupAccount(passwd, filepath.Join(dir, "missing"), "user")
	if err != nil || !reflect.DeepEqual(got.Groups, []uint32{1000}) {
		t.Fatalf("no group file: %+v, %v", got, err)
	}
	// Without a passwd file only numeric uids resolve.
	if _, err := lookupAccount(filepath.Join(dir, "missing"), group, "user"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("no passwd file: err = %v", err)
	}
}

func TestExecDirFallsBackToRoot(t *testing.T) {
	dir, err := execDir(&account{Home: "/nonexistent-home"}, "")
	if err != nil || dir != "/" {
		t.Fatalf("dir %q, err %v", dir, err)
	}
}

func TestParseSignal(t *testing.T) {
	for in, want := range map[string]int{"TERM": 15, "sigkill": 9, "SIGINT": 2, "10": 10, "STOP": 19, "CONT": 18} {
		if sig, ok := parseSignal(in); !ok || int(sig) != want {
			t.Errorf("parseSignal(%q) = %d, %v; want %d", in, sig, ok, want)
		}
	}
	for _, in := range []string{"", "BOGUS", "0", "-1", "65"} {
		if _, ok := parseSignal(in); ok {
			t.Errorf("parseSignal(%q) accepted", in)
		}
	}
}
