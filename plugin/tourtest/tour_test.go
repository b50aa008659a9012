// Package tourtest runs the README's tour as a reader runs it: every block
// fenced as "sh tour", in order, in one bash, from a directory that holds
// the repository's testdata, with the real kubectl finding the built plugin
// on PATH as `kubectl ql3`, against a fresh control plane of its own (etcd,
// kube-apiserver and kube-controller-manager, as a throwaway cluster).
package tourtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
)

var (
	cp     *testcluster.ControlPlane
	binDir string // holds the built kubectl-ql3
)

func TestMain(m *testing.M) {
	if !testcluster.NeedsCluster(os.Args[1:]) {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "ql3-tour-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	build := exec.Command("go", "build", "-ldflags", "-X github.com/qinglong/kubectl-ql3/plugin.version=v0.1.0-test", "-o", filepath.Join(dir, "kubectl-ql3"), "../../cmd/kubectl-ql3")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: build kubectl-ql3: %v\n", err)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	// The render cache and its key live in the test's own directory.
	os.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	testcluster.Main(m, testcluster.Options{ControllerManager: true}, &cp)
}

// tourRE matches one block of the tour: "```sh tour", its lines, "```".
var tourRE = regexp.MustCompile("(?ms)^```sh tour\n(.*?)^```$")

// tourSteps are the commands the README's tour must keep showing (its
// steps: lock, preflight, apply, diff, status, rollback, receipt audit,
// history), so that the test cannot pass on a tour that lost one.
var tourSteps = []string{
	"kubectl ql3 lock ", "kubectl ql3 preflight ", "--transition install", "--transition upgrade",
	"kubectl ql3 apply --preflight ", "kubectl ql3 diff ", "kubectl ql3 status ",
	"kubectl ql3 rollback ", "kubectl ql3 receipt audit ", "kubectl ql3 history ",
}

// The README's tour runs as written and every command in it exits 0 (bash
// with -e and pipefail): install, upgrade, a status that is in sync, a
// rollback, and an offline audit of the three receipts it wrote.
func TestREADMETour(t *testing.T) {
	root, err := testkit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var script strings.Builder
	script.WriteString("set -euxo pipefail\n")
	for _, m := range tourRE.FindAllStringSubmatch(string(readme), -1) {
		script.WriteString(m[1])
	}
	for _, s := range tourSteps {
		if !strings.Contains(script.String(), s) {
			t.Errorf("README.md's tour (its ```sh tour blocks) no longer shows %q", s)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	work := t.TempDir()
	if err := os.Symlink(filepath.Join(root, "testdata"), filepath.Join(work, "testdata")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = work
	cmd.Env = append(os.Environ(),
		"KUBECONFIG="+cp.AdminKubeconfig,
		"PATH="+binDir+string(os.PathListSeparator)+cp.BinDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	start := time.Now()
	stdout, stderr, code := testkit.Run(t, cmd)
	t.Logf("the tour took %s; its output:\n%s", time.Since(start).Round(time.Second), stdout)
	if code != 0 {
		t.Fatalf("the README's tour exited %d:\n%s\n%s", code, stdout, stderr)
	}
	entries, err := os.ReadDir(filepath.Join(work, "receipts"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := []string{"000001-install-3.1.0.receipt.json", "000002-upgrade-3.1.1.receipt.json", "000003-rollback-3.1.0.receipt.json"}
	if !slices.Equal(got, want) {
		t.Errorf("the tour's receipts directory holds %q, want %q", got, want)
	}
}
