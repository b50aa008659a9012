package importtest

import (
	"fmt"
	"testing"
)

type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Errorf(f string, a ...any) { r.errs = append(r.errs, fmt.Sprintf(f, a...)) }
func (r *recorder) Fatalf(f string, a ...any) {
	r.errs = append(r.errs, "fatal: "+fmt.Sprintf(f, a...))
}

// The check can fail: this package depends on os/exec, and an allowance
// lifts exactly that.
func TestForbid(t *testing.T) {
	r := &recorder{TB: t}
	Forbid(r, []string{"."}, []string{"os/exec"})
	if len(r.errs) != 1 {
		t.Fatalf("banning os/exec: %q, want one error", r.errs)
	}
	r = &recorder{TB: t}
	Forbid(r, []string{"."}, []string{"os"}, "os/exec", "os/signal", "os")
	if len(r.errs) != 0 {
		t.Fatalf("allowed: %q", r.errs)
	}
	if !under(Module+"/cas", "./cas") || under(Module+"/cascade", "./cas") || !under("k8s.io/client-go/rest", "k8s.io/client-go") {
		t.Fatal("under")
	}
}
