package keyset

import (
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/importtest"
)

// keyset is a pure format leaf: it never imports client-go, the CAS kernel,
// the ceremony, the plugin or kustomize (docs/keyset.md); digests come from
// the leaf package inventory/canon.
func TestPureFormatImports(t *testing.T) {
	importtest.Forbid(t, []string{"."}, []string{"k8s.io/client-go", "sigs.k8s.io/kustomize", "./cas", "./ceremony", "./plugin", "./inventory"}, "./inventory/canon")
}
