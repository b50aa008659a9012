package ocistage_test

import (
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/importtest"
)

// A pure format over a directory: ocistage never imports client-go,
// kustomize, any network client, the CAS kernel, the ceremony, the plugin
// or the renderer (inventory; its leaf inventory/canon is allowed).
func TestPureFormatImports(t *testing.T) {
	importtest.Forbid(t, []string{".", "./ocistagetest"}, []string{"k8s.io/client-go", "sigs.k8s.io/kustomize", "net/http", "./cas", "./ceremony", "./plugin", "./inventory"}, "./inventory/canon")
}
