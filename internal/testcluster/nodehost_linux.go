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

// hostLockPath serialises test nodes on one machine (two test packages
// run at once under go test ./...): the sysctls the kubelet changes and
// the fixed directories containerd 1.6 uses are the machine's, so one
// node's restore must not undo another's start.
const hostLockPath = "/run/lock/ql3-test-node.lock"

// lockHost waits until no other test node runs here and holds the lock
// until unlock; the kernel drops it if the process dies.
func lockHost() (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(hostLockPath), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(hostLockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", hostLockPath, err)
	}
	return func() { f.Close() }, nil
}
