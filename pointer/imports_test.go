package pointer

import (
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/importtest"
)

// A sibling cluster operation: pointer writes through the cas kernel and
// never imports the ceremony, the plugin or the renderer.
func TestSiblingImports(t *testing.T) {
	importtest.Forbid(t, []string{"."}, []string{"sigs.k8s.io/kustomize", "./ceremony", "./plugin", "./inventory"}, "./inventory/canon")
}
