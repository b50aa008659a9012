package delivery

import (
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/importtest"
)

// delivery is a pure format leaf: it never imports client-go, the CAS
// kernel, the ceremony, the plugin or the renderer (inventory; its leaf
// inventory/canon is allowed).
func TestPureFormatImports(t *testing.T) {
	importtest.Forbid(t, []string{"."}, []string{"k8s.io/client-go", "sigs.k8s.io/kustomize", "./cas", "./ceremony", "./plugin", "./worker", "./inventory"}, "./inventory/canon")
}
