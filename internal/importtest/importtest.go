// Package importtest is the one check behind every package's import test:
// the packages named (go list patterns, relative to the test's directory)
// may not depend, transitively, on any banned import path. Only tests use
// it; docs/architecture.md lists the rules and internal/arch checks them
// over the whole module.
package importtest

import (
	"os/exec"
	"strings"
	"testing"
)

// Module is the module path; banned entries starting with "./" are taken
// relative to it ("./cas" is github.com/qinglong/kubectl-ql3/cas).
const Module = "github.com/qinglong/kubectl-ql3"

func expand(p string) string {
	if rest, ok := strings.CutPrefix(p, "./"); ok {
		return Module + "/" + rest
	}
	return p
}

func under(path, prefix string) bool {
	prefix = strings.TrimSuffix(expand(prefix), "/")
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// Forbid fails t for every dependency of pkgs under a banned prefix that is
// not under an allowed one.
func Forbid(t testing.TB, pkgs []string, banned []string, allowed ...string) {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps printed too little to judge: %q", out)
	}
	for _, d := range deps {
		for _, b := range banned {
			if !under(d, b) {
				continue
			}
			ok := false
			for _, a := range allowed {
				ok = ok || under(d, a)
			}
			if !ok {
				t.Errorf("%v depends on %s (banned: %s)", pkgs, d, b)
			}
		}
	}
}
