package worker

import (
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/importtest"
)

// The audit is offline: it renders with inventory (kustomize) but never
// links client-go, the CAS kernel, the worker operation, the ceremony or
// the plugin.
func TestOfflineImports(t *testing.T) {
	importtest.Forbid(t, []string{"."}, []string{"k8s.io/client-go", "./ceremony", "./cas", "./plugin", "./worker"})
}
