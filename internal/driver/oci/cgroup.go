package oci

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"golang.org/x/sys/unix"
)

// removeCgroupDir removes a cgroup directory, waiting up to two seconds
// while it is busy: processes SIGKILLed by the runtime's delete may still
// be exiting (a sandbox of many processes takes a moment).
func removeCgroupDir(d string) error {
	deadline := time.Now().Add(2 * time.Second)
	for {
		err := os.Remove(d)
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cgroupRoot is where the cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupDirs lists the sandbox's cgroup directories in every hierarchy (v1
// controllers, or the v2 unified tree).
func cgroupDirs(id string) []string {
	rel := filepath.Join("airlock", id)
	dirs, _ := filepath.Glob(filepath.Join(cgroupRoot, "*", rel))
	if _, err := os.Stat(filepath.Join(cgroupRoot, rel)); err == nil {
		dirs = append(dirs, filepath.Join(cgroupRoot, rel))
	}
	return dirs
}

// removeCgroups removes the sandbox's cgroups that the runtime left behind.
// Runtimes remove their own on delete; this catches crashes. A cgroup
// directory is removed with rmdir (its files are virtual), children first.
func removeCgroups(id string) error {
	var errs []error
	for _, top := range cgroupDirs(id) {
		var dirs []string
		filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := removeCgroupDir(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}
