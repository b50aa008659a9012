//go:build ql3crash

package crashpoint

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// With the ql3crash tag, a process dies by SIGKILL at the named point.
func TestKillsWithTag(t *testing.T) {
	if os.Getenv("QL3_CRASHPOINT_CHILD") == "1" {
		At("acquired")
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillsWithTag$")
	cmd.Env = append(os.Environ(), "QL3_CRASHPOINT_CHILD=1", "QL3_CRASH_AT=acquired")
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child with QL3_CRASH_AT=acquired: %v, want killed by SIGKILL", err)
	}
}
