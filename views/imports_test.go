package views

import (
	"os/exec"
	"strings"
	"testing"
)

// The views are read-only operations beside the ceremony: they may import
// ceremony, cas, receipts and inventory, never the CLI (docs/architecture.md).
func TestViewsImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps printed too little to judge: %q", out)
	}
	for _, d := range deps {
		for _, banned := range []string{"github.com/qinglong/kubectl-ql3/plugin", "github.com/qinglong/kubectl-ql3/internal/testcluster", "github.com/qinglong/kubectl-ql3/internal/faults"} {
			if d == banned || strings.HasPrefix(d, banned+"/") {
				t.Errorf("views depends on %s", d)
			}
		}
	}
}
