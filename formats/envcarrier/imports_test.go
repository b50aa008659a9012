package envcarrier

import (
	"os/exec"
	"strings"
	"testing"
)

// envcarrier is a pure format leaf: it never imports client-go, the CAS
// kernel, the ceremony, the plugin, kustomize or inventory (not even
// inventory/canon: it calls gowebpki/jcs itself, so the leaf carries no
// Kubernetes package at all).
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
		for _, banned := range []string{"k8s.io/", "sigs.k8s.io/", "github.com/qinglong/kubectl-ql3/cas", "github.com/qinglong/kubectl-ql3/ceremony", "github.com/qinglong/kubectl-ql3/plugin", "github.com/qinglong/kubectl-ql3/inventory", "github.com/qinglong/kubectl-ql3/receipts"} {
			if d == banned || strings.HasPrefix(d, strings.TrimSuffix(banned, "/")+"/") {
				t.Errorf("envcarrier depends on %s", d)
			}
		}
	}
}
