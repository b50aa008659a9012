package plugin_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/views"
)

// A field manager is a name any writer may send. Values changed with
// kubectl under the deployer's own field manager name (kubectl-ql3: a
// patch, and a server-side apply of the whole object, which is exactly
// the deployer's manager) and under the Head's (kubectl-ql3-head: set
// image) leave managedFields looking like the deployer's: status
// --release compares values, so each is drift, exit 3, named by its path.
// Without --release status cannot see them, and says so and what to run.
func TestCLIStatusOwnManagerNames(t *testing.T) {
	ns := controlNamespace(t)
	v310 := releaseCopy(t, "v3.1.0", ns, "")
	work := t.TempDir()
	pf := filepath.Join(work, "install.json")
	mustRun(t, nil, "preflight", v310, "--transition", "install", "--expected-head", headToken(t, nil, ns), "--out", pf)
	mustRun(t, nil, "apply", "--preflight", pf, "--receipts-dir", filepath.Join(work, "receipts"))
	if out, stderr, code := run(t, nil, "status", "-n", ns, "--release", v310); code != 0 {
		t.Fatalf("status --release after install: exit %d\n%s%s", code, out, stderr)
	}

	kubectl := func(in string, args ...string) {
		t.Helper()
		if out, err := kubectlAs(t, cp.AdminKubeconfig, in, append(args, "-n", ns)...); err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
	}
	kubectl("", "patch", "configmap", "ql3-config", "--field-manager", "kubectl-ql3", "-p", `{"data":{"log-level":"trace"}}`)
	kubectl("", "set", "image", "deployment/ql3-worker", "--field-manager", deploy.HeadFieldManager,
		"worker=registry.k8s.io/pause:3.10@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a")
	features, err := cp.Clientset().CoreV1().ConfigMaps(ns).Get(context.Background(), "ql3-features", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "ql3-features", "namespace": ns, "labels": features.Labels},
		"data":     map[string]any{"ai-routing": features.Data["ai-routing"], "batch-size": "4096"},
	})
	if err != nil {
		t.Fatal(err)
	}
	kubectl(string(body), "apply", "--server-side", "--field-manager", "kubectl-ql3", "-f", "-")

	out, stderr, code := run(t, nil, "status", "-n", ns, "--release", v310, "-o", "json")
	var st views.StatusReport
	if code != 3 || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("status --release after the changes: exit %d, want 3\n%s%s", code, out, stderr)
	}
	want := map[string][]string{
		"ConfigMap/ql3-config":   {".data.log-level"},
		"ConfigMap/ql3-features": {".data.batch-size"},
		"Deployment/ql3-worker":  {".spec.template.spec.containers[name=worker].image"},
	}
	for _, o := range st.Objects {
		key := o.Object.Kind + "/" + o.Object.Name
		w, ok := want[key]
		switch {
		case ok && (o.State != views.StateDrifted || !slices.Equal(o.Changed, w) || len(o.Removed) != 0):
			t.Errorf("%s: state %s, changed %v, removed %v; want drifted, changed %v", key, o.State, o.Changed, o.Removed, w)
		case ok && len(o.Drift) != 0:
			t.Errorf("%s: managedFields drift %v: the writes sent the tool's own names, managedFields cannot tell", key, o.Drift)
		case !ok && o.State == views.StateDrifted:
			t.Errorf("%s drifted without anyone touching it: %v %v %v", key, o.Drift, o.Changed, o.Removed)
		}
	}
	if st.Drifted != len(want) || !st.ValuesCompared || st.NotSeen != "" {
		t.Errorf("drifted %d, want %d; valuesCompared %v notSeen %q", st.Drifted, len(want), st.ValuesCompared, st.NotSeen)
	}
	out, _, code = run(t, nil, "status", "-n", ns, "--release", v310)
	t.Logf("status --release:\n%s", out)
	if code != 3 || !strings.Contains(out, ".data.log-level differs from the release (whoever wrote it)") {
		t.Errorf("status --release human output: exit %d", code)
	}

	// Without the release the same cluster reads in sync (once the
	// Deployment's new generation is observed): status says what it
	// cannot see, and what to run.
	out, stderr, code = run(t, nil, "status", "-n", ns, "--watch", "--interval", "200ms", "--timeout", "60s")
	if code != 0 || !strings.Contains(out, "Release:     not compared: a change written under the deployer's field manager name (kubectl-ql3) or the Head's (kubectl-ql3-head) looks like the deployer's own") ||
		!strings.Contains(out, "kubectl ql3 status -n "+ns+" --release DIR") {
		t.Fatalf("status without --release: exit %d\n%s%s", code, out, stderr)
	}
	st = views.StatusReport{}
	if err := json.Unmarshal([]byte(mustRun(t, nil, "status", "-n", ns, "-o", "json")), &st); err != nil || st.ValuesCompared ||
		!strings.Contains(st.NotSeen, "kubectl-ql3-head") || !strings.Contains(st.NotSeen, "kubectl ql3 diff DIR") {
		t.Fatalf("status -o json without --release: %v notSeen %q", err, st.NotSeen)
	}
}
