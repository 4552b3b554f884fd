package agent

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/airlockdev/airlock/internal/errdefs"
)

// account is a user resolved from the sandbox's own /etc/passwd and
// /etc/group. The agent parses them itself rather than using os/user: the
// binary is static (no NSS) and must see the sandbox's files, not whatever
// a libc lookup would consult.
type account struct {
	Name   string
	UID    uint32
	GID    uint32
	Groups []uint32 // supplementary groups, primary gid included
	Home   string
	Shell  string // login shell, may be empty
}

// credential returns the credential to start a process as a, or nil when
// the process should simply inherit the agent's identity: a non-root agent
// cannot switch users, and asking for itself must still work (tests, or an
// agent run unprivileged).
func (a *account) credential() *syscall.Credential {
	if os.Geteuid() != 0 && int(a.UID) == os.Geteuid() {
		return nil
	}
	return &syscall.Credential{Uid: a.UID, Gid: a.GID, Groups: a.Groups}
}

// chown gives path to a. Only a root agent can hand files to other users;
// otherwise files already belong to the agent's own uid.
func (a *account) chown(path string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	return os.Lchown(path, int(a.UID), int(a.GID))
}

// lookupAccount resolves name, a user name or a numeric uid. A numeric uid
// without a passwd entry is accepted (as container runtimes do) with gid
// equal to the uid, never gid 0, and home "/".
func lookupAccount(passwdFile, groupFile, name string) (*account, error) {
	if name == "" {
		return nil, fmt.Errorf("user: empty name: %w", errdefs.ErrInvalidArgument)
	}
	uid, numErr := strconv.ParseUint(name, 10, 32)
	acct, err := findPasswd(passwdFile, func(f []string) bool {
		if f[0] == name {
			return true
		}
		return numErr == nil && f[2] == strconv.FormatUint(uid, 10)
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if acct == nil {
		if numErr != nil {
			return nil, fmt.Errorf("user %q: %w", name, errdefs.ErrNotFound)
		}
		acct = &account{Name: name, UID: uint32(uid), GID: uint32(uid), Home: "/"}
	}
	groups, err := supplementaryGroups(groupFile, acct.Name, acct.GID)
	if err != nil {
		return nil, err
	}
	acct.Groups = groups
	return acct, nil
}

// findPasswd returns the first passwd entry match accepts, or nil.
func findPasswd(file string, match func(fields []string) bool) (*account, error) {
	var found *account
	err := scanColonFile(file, 7, func(f []string) bool {
		if !match(f) {
			return true
		}
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			return true // a malformed line cannot be the user we run as
		}
		found = &account{Name: f[0], UID: uint32(uid), GID: uint32(gid), Home: f[5], Shell: f[6]}
		return false
	})
	return found, err
}

// supplementaryGroups lists the groups naming user as a member, plus
// primary, like initgroups(3). A missing group file just means no extras.
func supplementaryGroups(file, user string, primary uint32) ([]uint32, error) {
	groups := []uint32{primary}
	err := scanColonFile(file, 4, func(f []string) bool {
		gid, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil || uint32(gid) == primary {
			return true
		}
		for _, m := range strings.Split(f[3], ",") {
			if strings.TrimSpace(m) == user {
				groups = append(groups, uint32(gid))
				break
			}
		}
		return true
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	return groups, nil
}

// scanColonFile calls fn with the fields of each line of a passwd-style
// file that has at least minFields fields, until fn returns false.
// Comments and NIS "+"/"-" lines are skipped.
func scanColonFile(file string, minFields int, fn func([]string) bool) error {
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '+' || line[0] == '-' {
			continue
		}
		fields := strings.Split(line, ":")
		if len(fields) < minFields {
			continue
		}
		if !fn(fields) {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	return nil
}
