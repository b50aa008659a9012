package keyset

import (
	"os/exec"
	"strings"
	"testing"
)

// keyset is a pure format leaf: it never imports client-go, the CAS kernel,
// the ceremony, the plugin or kustomize (docs/keyset.md); digests come from
// the leaf package inventory/canon.
func TestPureFormatImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps printed too little to judge: %q", out)
	}
	for _, d := range deps {
		for _, banned := range []string{"k8s.io/client-go", "sigs.k8s.io/kustomize", "github.com/qinglong/kubectl-ql3/cas", "github.com/qinglong/kubectl-ql3/ceremony", "github.com/qinglong/kubectl-ql3/plugin", "github.com/qinglong/kubectl-ql3/inventory"} {
			if d == banned || strings.HasPrefix(d, banned+"/") && !strings.HasPrefix(d, "github.com/qinglong/kubectl-ql3/inventory/canon") {
				t.Errorf("keyset depends on %s", d)
			}
		}
	}
}
