package rendercache

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The running test binary is named by its Go build ID, exactly what
// `go tool buildid` prints for it, and not by a hash of its bytes.
func TestExecutableNamedByGoBuildID(t *testing.T) {
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "tool", "buildid", p).Output()
	if err != nil {
		t.Fatalf("go tool buildid: %v", err)
	}
	got, err := executableDigest()
	if err != nil {
		t.Fatal(err)
	}
	if want := goBuildIDPrefix + strings.TrimSpace(string(out)); got != want {
		t.Fatalf("executable %q, want %q", got, want)
	}
	if goBuildID("/dev/null") != "" || goBuildID(os.DevNull+"-absent") != "" {
		t.Fatalf("a file without a Go build ID got one")
	}
}
