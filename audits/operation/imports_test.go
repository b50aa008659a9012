package operation

import (
	"os/exec"
	"strings"
	"testing"
)

// The audit is offline: it renders with inventory (kustomize) but never
// links client-go, the ceremony, the CAS kernel or the plugin.
func TestOfflineImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps printed too little to judge: %q", out)
	}
	for _, d := range deps {
		for _, banned := range []string{"k8s.io/client-go", "github.com/qinglong/kubectl-ql3/ceremony", "github.com/qinglong/kubectl-ql3/cas", "github.com/qinglong/kubectl-ql3/plugin"} {
			if d == banned || strings.HasPrefix(d, banned+"/") {
				t.Errorf("audits/operation depends on %s", d)
			}
		}
	}
}
