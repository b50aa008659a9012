package plugin_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/fleet"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// The fleet commands through the built binary, as a user types them: two
// targets (two control namespaces of the test cluster: this test is of the
// CLI — flags, output, exit codes; fleets of real clusters are proven in
// ceremony/fleet), each through the kubeconfig the fleet file names.
func TestCLIFleet(t *testing.T) {
	dir, file := cliFleet(t)

	if out, stderr, code := run(t, nil, "fleet", "lock", file); code != 2 || !strings.Contains(stderr, "version") {
		t.Fatalf("fleet lock without --version: exit %d, want 2\n%s%s", code, out, stderr)
	}
	mustRunOK(t, "fleet", "lock", file, "--version", "3.0.0")
	out := mustRunOK(t, "fleet", "preflight", file, "-o", "json")
	if !strings.Contains(out, `"state": "preflighted"`) {
		t.Fatalf("fleet preflight -o json: %s", out)
	}
	out, stderr, code := run(t, nil, "fleet", "status", file)
	if code != 3 || !regexp.MustCompile(`t0\s+first\s+\S+\s+absent`).MatchString(out) {
		t.Fatalf("fleet status before apply: exit %d, want 3 with t0 absent\n%s%s", code, out, stderr)
	}
	var rep fleet.ApplyReport
	key, pub := writeEd25519(t, t.TempDir(), "ops")
	if err := json.Unmarshal([]byte(mustRunOK(t, "fleet", "apply", file, "-o", "json", "--sign-key", key)), &rep); err != nil || rep.Outcome != fleet.WaveDone || len(rep.Waves) != 2 {
		t.Fatalf("fleet apply -o json: %+v %v", rep, err)
	}
	out = mustRunOK(t, "fleet", "status", file)
	if !regexp.MustCompile(`t1\s+second\s+\S+\s+at plan\s+1\s+committed\s+3\.0\.0`).MatchString(out) {
		t.Fatalf("fleet status after apply:\n%s", out)
	}
	if out := mustRunOK(t, "fleet", "apply", file); !strings.Contains(out, fleet.StateAlreadyCommitted) {
		t.Fatalf("fleet apply again:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "receipts", "t1")); err != nil {
		t.Fatalf("t1's receipts directory: %v", err)
	}
	mustRunOK(t, "receipt", "audit", filepath.Join(dir, "receipts", "t0"))
	// The rollout receipt of the first apply audits with its targets'
	// receipts; mixed with a deployment receipts directory it is refused.
	if out := mustRunOK(t, "receipt", "audit", rep.Rollout, "--trusted-key", pub); !strings.Contains(out, "attestation verified") || !regexp.MustCompile(`second\s+t1\s+committed\s+t1/000001-install-3\.0\.0\.receipt\.json\s+ok`).MatchString(out) {
		t.Fatalf("receipt audit of the rollout receipt:\n%s", out)
	}
	if _, stderr, code := run(t, nil, "receipt", "audit", rep.Rollout, filepath.Join(dir, "receipts", "t0")); code != 2 || !strings.Contains(stderr, "not both") {
		t.Fatalf("receipt audit of a rollout receipt and a directory: exit %d, want 2\n%s", code, stderr)
	}
}

// cliFleet is a fleet of two targets, t0 (wave first) and t1 (wave
// second), in two control namespaces of the test cluster, each through
// the kubeconfig the fleet file names: its directory and the file.
func cliFleet(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	kc, err := os.ReadFile(cp.AdminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "kubeconfigs"), 0o755); err != nil {
		t.Fatal(err)
	}
	testkit.WriteFile(t, filepath.Join(dir, "kubeconfigs", "test.yaml"), kc, 0o600)
	var targets strings.Builder
	for i, ring := range []string{"first", "second"} {
		ns := controlNamespace(t)
		rel := filepath.Join(dir, "releases", ring)
		if err := os.CopyFS(rel, os.DirFS(fixtureDir("v3.0.0"))); err != nil {
			t.Fatal(err)
		}
		_ = os.Remove(filepath.Join(rel, inventory.LockFile))
		k, err := os.ReadFile(filepath.Join(rel, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		testkit.WriteFile(t, filepath.Join(rel, "kustomization.yaml"), []byte(strings.Replace(string(k), "namespace: ql3-demo", "namespace: "+ns, 1)), 0o644)
		fmt.Fprintf(&targets, "- {name: t%d, labels: {ring: %s}, kubeconfig: kubeconfigs/test.yaml, namespace: %s, release: releases/%s}\n", i, ring, ns, ring)
	}
	file := filepath.Join(dir, "fleet.yaml")
	testkit.WriteFile(t, file, []byte("schema: kubectl-ql3/fleet@v1\ntargets:\n"+targets.String()+
		"waves:\n- {name: first, selector: {matchLabels: {ring: first}}}\n- {name: second, selector: {names: [t1]}}\n"), 0o644)
	return dir, file
}

func mustRunOK(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, code := run(t, nil, args...)
	if code != 0 {
		t.Fatalf("kubectl ql3 %s: exit %d\n%s%s", strings.Join(args, " "), code, out, stderr)
	}
	return out
}
