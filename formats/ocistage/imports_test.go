package ocistage_test

import (
	"os/exec"
	"strings"
	"testing"
)

// A pure format over a directory: ocistage never imports client-go,
// kustomize, any network client, the CAS kernel, the ceremony, the plugin
// or the renderer (inventory; its leaf inventory/canon is allowed).
func TestPureFormatImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".", "./ocistagetest").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps printed too little to judge: %q", out)
	}
	const mod = "github.com/qinglong/kubectl-ql3/"
	for _, d := range deps {
		for _, banned := range []string{"k8s.io/client-go", "sigs.k8s.io/kustomize", "net/http", mod + "cas", mod + "ceremony", mod + "plugin", mod + "inventory"} {
			if (d == banned || strings.HasPrefix(d, banned+"/")) && d != mod+"inventory/canon" {
				t.Errorf("ocistage depends on %s", d)
			}
		}
	}
}
