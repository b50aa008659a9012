package plugin_test

import (
	"strings"
	"testing"
)

// preflight --approval takes two-person or none: anything else is a usage
// error (exit 2) naming the flag, before anything is read.
func TestPreflightApprovalFlag(t *testing.T) {
	_, stderr, code := run(t, nil, "preflight", "dir", "--transition", "install", "--expected-head", "ql3h1-0-none", "--approval", "three-person")
	if code != 2 || !strings.Contains(stderr, `--approval "three-person": want "two-person" or "none"`) {
		t.Fatalf("exit %d, stderr %q; want exit 2 naming --approval", code, stderr)
	}
}
