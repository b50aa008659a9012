package plugin_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/views"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// diff shows everything the next transition would do (issue #22 item 4):
// objects the Head deploys that the release no longer contains are "would
// be retired", with the UID and resourceVersion a retire's preflight
// records (or already absent), --exit-code says 1 for them alone, and
// preflight --transition retire --diff lists the same.
func TestCLIDiffWouldRetire(t *testing.T) {
	ns := controlNamespace(t)
	base, v320 := retireReleases(t, ns) // v3.1.0 with the ql3-batch Deployment; 3.2.0 without it and ql3-features
	work := t.TempDir()
	pf := filepath.Join(work, "install.json")
	mustRun(t, nil, "preflight", base, "--transition", "install", "--expected-head", headToken(t, nil, ns), "--out", pf)
	mustRun(t, nil, "apply", "--preflight", pf, "--receipts-dir", filepath.Join(work, "receipts"))
	// The same version without ql3-batch and ql3-features: nothing else
	// changes.
	drop := releaseCopy(t, "v3.1.0", ns, "")
	relock(t, drop, "3.1.0", func(k string) string { return strings.Replace(k, "- features.yaml\n", "", 1) })
	ctx := context.Background()
	cs := cp.Clientset()
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, "ql3-features", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	out, stderr, code := run(t, nil, "diff", drop, "--exit-code")
	t.Logf("diff of a release without two objects of the Head:\n%s%s", out, stderr)
	batch, err := cs.AppsV1().Deployments(ns).Get(ctx, "ql3-batch", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if code != 1 {
		t.Errorf("diff --exit-code: exit %d, want 1 (differences)", code)
	}
	wantBatch := "would be retired apps/v1/Deployment/" + ns + "/ql3-batch (uid " + string(batch.UID) + " resourceVersion " + batch.ResourceVersion + ")\n"
	for _, want := range []string{wantBatch, "would be retired v1/ConfigMap/" + ns + "/ql3-features (already absent)\n", ": 0 created, 0 changed, "} {
		if !strings.Contains(out, want) {
			t.Errorf("diff does not say %q", want)
		}
	}
	out, stderr, code = run(t, nil, "diff", drop, "-o", "json")
	var rep views.DiffReport
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("diff -o json: exit %d\n%s%s", code, out, stderr)
	}
	want := []views.WouldRetire{
		{Object: inventory.Identity{APIVersion: "apps/v1", Kind: "Deployment", Namespace: ns, Name: "ql3-batch"}, UID: string(batch.UID), ResourceVersion: batch.ResourceVersion},
		{Object: inventory.Identity{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "ql3-features"}},
	}
	if len(rep.Retire) != 2 || rep.Retire[0] != want[0] || rep.Retire[1] != want[1] || !rep.HasChanges() {
		t.Errorf("diff -o json retire: %+v, want %+v", rep.Retire, want)
	}
	// The hidden profiling flags diff shares with the ceremony (make bench
	// profiles with them) write their profiles.
	cpu, mem := filepath.Join(work, "diff.cpu.pprof"), filepath.Join(work, "diff.mem.pprof")
	if out := mustRun(t, nil, "diff", drop, "-o", "name", "--cpuprofile", cpu, "--memprofile", mem); !strings.Contains(out, "deployment.apps/ql3-batch\n") || !strings.Contains(out, "configmap/ql3-features\n") {
		t.Errorf("diff -o name lacks the retired objects:\n%s", out)
	}
	for _, p := range []string{cpu, mem} {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Errorf("diff --cpuprofile/--memprofile: %s not written (%v)", p, err)
		}
	}
	// A retire needs a version above the Head's: 3.2.0 drops the same two.
	out = mustRun(t, nil, "preflight", v320, "--transition", "retire", "--expected-head", headToken(t, nil, ns), "--out", filepath.Join(work, "retire.json"), "--diff")
	if !strings.Contains(out, wantBatch) {
		t.Errorf("preflight --transition retire --diff does not say %q:\n%s", wantBatch, out)
	}
}
