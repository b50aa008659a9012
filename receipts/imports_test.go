package receipts

import (
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/importtest"
)

// The offline auditor carries no cluster code and no renderer: receipts
// never imports client-go, the ceremony, the plugin, or kustomize (the
// design card's import rule; digests and identities come from the leaf
// package inventory/canon).
func TestOfflineAuditorImports(t *testing.T) {
	importtest.Forbid(t, []string{"."}, []string{"k8s.io/client-go", "sigs.k8s.io/kustomize", "./ceremony", "./plugin", "./inventory"}, "./inventory/canon")
}
