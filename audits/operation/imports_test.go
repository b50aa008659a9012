package operation

import (
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/importtest"
)

// The audit is offline: it renders with inventory (kustomize) but never
// links client-go, the ceremony, the CAS kernel or the plugin.
func TestOfflineImports(t *testing.T) {
	importtest.Forbid(t, []string{"."}, []string{"k8s.io/client-go", "./ceremony", "./cas", "./plugin"})
}
