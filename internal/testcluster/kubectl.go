package testcluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Kubectl runs the control plane's kubectl as the admin with args, stdin
// in, and fails t if it fails.
func (cp *ControlPlane) Kubectl(t testing.TB, stdin string, args ...string) string {
	t.Helper()
	out, err := cp.KubectlErr(stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s\n%s", strings.Join(args, " "), err, out, stdin)
	}
	return string(out)
}

// KubectlApply pipes manifest (YAML or JSON, as an rbac command prints it)
// into the control plane's `kubectl apply -f -` as the admin, as an
// operator would grant what the command printed.
func (cp *ControlPlane) KubectlApply(t testing.TB, manifest string) {
	t.Helper()
	cp.Kubectl(t, manifest, "apply", "-f", "-")
}

// KubectlErr is Kubectl for a command that may fail: its combined output
// and its error.
func (cp *ControlPlane) KubectlErr(stdin string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(cp.BinDir, "kubectl"), args...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.AdminKubeconfig)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
