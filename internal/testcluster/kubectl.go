package testcluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// KubectlApply pipes manifest (YAML or JSON, as an rbac command prints it)
// into the control plane's `kubectl apply -f -` as the admin, as an
// operator would grant what the command printed.
func (cp *ControlPlane) KubectlApply(t testing.TB, manifest string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(cp.BinDir, "kubectl"), "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.AdminKubeconfig)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s\n%s", err, out, manifest)
	}
}
