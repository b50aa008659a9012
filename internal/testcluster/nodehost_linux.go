package testcluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// killCgroup SIGKILLs the processes of cgroup d and removes it once empty.
func killCgroup(d string) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		pids := splitLines(string(b))
		for _, s := range pids {
			if pid, err := strconv.Atoi(s); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		err := syscall.Rmdir(d)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "testcluster: remove cgroup %s: %v (processes %v)\n", d, err, pids)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// unmountUnder detaches every mount below dir (container root filesystems,
// shm, volume tmpfs a crashed kubelet left), deepest first.
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var mounts []string
	for _, line := range splitLines(string(b)) {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			mounts = append(mounts, f[4])
		}
	}
	slices.Reverse(mounts)
	for _, m := range mounts {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
}
