package testcluster

import (
	"os/exec"
	"syscall"
)

// detach puts the child in its own process group and has the kernel kill it
// if the test binary dies first, so a crashed test leaves no server behind.
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
