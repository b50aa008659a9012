package envcarrier

import (
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/importtest"
)

// envcarrier is a pure format leaf: it never imports client-go, the CAS
// kernel, the ceremony, the plugin, kustomize or inventory (not even
// inventory/canon: it calls gowebpki/jcs itself, so the leaf carries no
// Kubernetes package at all).
func TestPureFormatImports(t *testing.T) {
	importtest.Forbid(t, []string{"."}, []string{"k8s.io/", "sigs.k8s.io/", "./cas", "./ceremony", "./plugin", "./inventory", "./receipts"})
}
