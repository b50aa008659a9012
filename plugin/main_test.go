package plugin_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
)

var (
	cp     *testcluster.ControlPlane
	binary string // the built kubectl-ql3, run as users run it
)

func TestMain(m *testing.M) {
	if !testcluster.NeedsCluster(os.Args[1:]) {
		// Fuzzing (or -list): the fuzz targets run no binary and no
		// cluster. Building one per fuzz worker would also rebuild every
		// dependency: the workers inherit the XDG_CACHE_HOME set below.
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "ql3-plugin-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "kubectl-ql3")
	build := exec.Command("go", "build", "-ldflags", "-X github.com/qinglong/kubectl-ql3/plugin.version=v0.1.0-test", "-o", binary, "../cmd/kubectl-ql3")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: build kubectl-ql3: %v\n", err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	// The render cache of every run below, and its key, live in the test's
	// own directory.
	os.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	testcluster.Main(m, testcluster.Options{ControllerManager: true, AuditLog: true, OIDC: true}, &cp)
}

// run executes the built plugin and returns stdout, stderr and the exit code.
func run(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+cp.AdminKubeconfig), env...)
	return testkit.Run(t, cmd)
}
