//go:build !ql3crash

package crashpoint

import (
	"os"
	"os/exec"
	"testing"
)

// Without the ql3crash tag, QL3_CRASH_AT is ignored: a child process asked
// to crash at a point runs past it and exits 0.
func TestIgnoredWithoutTag(t *testing.T) {
	if os.Getenv("QL3_CRASHPOINT_CHILD") == "1" {
		At("acquired")
		os.Exit(0)
	}
	if Enabled {
		t.Fatal("the hook is enabled in a build without the ql3crash tag")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestIgnoredWithoutTag$")
	cmd.Env = append(os.Environ(), "QL3_CRASHPOINT_CHILD=1", "QL3_CRASH_AT=acquired")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child with QL3_CRASH_AT=acquired: %v\n%s", err, out)
	}
}
