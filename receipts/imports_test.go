package receipts

import (
	"os/exec"
	"strings"
	"testing"
)

// The offline auditor carries no cluster code and no renderer: receipts
// never imports client-go, the ceremony, the plugin, or kustomize (the
// design card's import rule; digests and identities come from the leaf
// package inventory/canon).
func TestOfflineAuditorImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps printed too little to judge: %q", out)
	}
	for _, d := range deps {
		for _, banned := range []string{"k8s.io/client-go", "sigs.k8s.io/kustomize", "github.com/qinglong/kubectl-ql3/ceremony", "github.com/qinglong/kubectl-ql3/plugin", "github.com/qinglong/kubectl-ql3/inventory"} {
			if d == banned || strings.HasPrefix(d, banned+"/") && !strings.HasPrefix(d, "github.com/qinglong/kubectl-ql3/inventory/canon") {
				t.Errorf("receipts depends on %s", d)
			}
		}
	}
}
