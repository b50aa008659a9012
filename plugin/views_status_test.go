package plugin_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/views"
)

// status sees fields that another client removed (issue #22 item 3): a
// label, a ConfigMap data key and a container field, each removed by a
// kubectl-edit-like update. Server-side apply leaves no trace of such a
// removal in managedFields; status --release compares the release the
// Head deployed with the live objects and reports each as drift.
func TestCLIStatusRemovedFields(t *testing.T) {
	ns := controlNamespace(t)
	v310 := releaseCopy(t, "v3.1.0", ns, "")
	work := t.TempDir()
	pf := filepath.Join(work, "install.json")
	mustRun(t, nil, "preflight", v310, "--transition", "install", "--expected-head", headToken(t, nil, ns), "--out", pf)
	mustRun(t, nil, "apply", "--preflight", pf, "--receipts-dir", filepath.Join(work, "receipts"))

	// Every object of the fixture compares in sync right after the install.
	out, stderr, code := run(t, nil, "status", "-n", ns, "--release", v310, "-o", "json")
	var st views.StatusReport
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || !st.ValuesCompared || !st.InSync {
		t.Fatalf("status --release after install: exit %d\n%s%s", code, out, stderr)
	}

	ctx := context.Background()
	cs := cp.Clientset()
	edit := metav1.UpdateOptions{FieldManager: "kubectl-edit"}
	svc, err := cs.CoreV1().Services(ns).Get(ctx, "ql3-control", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(svc.Labels, "app.kubernetes.io/part-of")
	if _, err := cs.CoreV1().Services(ns).Update(ctx, svc, edit); err != nil {
		t.Fatal(err)
	}
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "ql3-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(cm.Data, "queue")
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, edit); err != nil {
		t.Fatal(err)
	}
	dep, err := cs.AppsV1().Deployments(ns).Get(ctx, "ql3-worker", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dep.Spec.Template.Spec.Containers[0].EnvFrom = nil
	if _, err := cs.AppsV1().Deployments(ns).Update(ctx, dep, edit); err != nil {
		t.Fatal(err)
	}

	out, stderr, code = run(t, nil, "status", "-n", ns, "--release", v310, "-o", "json")
	st = views.StatusReport{}
	if code != 3 || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("status --release after the edits: exit %d, want 3\n%s%s", code, out, stderr)
	}
	want := map[string][]string{
		"Service/ql3-control":   {".metadata.labels.app.kubernetes.io/part-of"},
		"ConfigMap/ql3-config":  {".data.queue"},
		"Deployment/ql3-worker": {".spec.template.spec.containers[name=worker].envFrom"},
	}
	for _, o := range st.Objects {
		key := o.Object.Kind + "/" + o.Object.Name
		if w, ok := want[key]; ok {
			if o.State != views.StateDrifted || !slices.Equal(o.Removed, w) {
				t.Errorf("%s: state %s, removed %v; want drifted, removed %v", key, o.State, o.Removed, w)
			}
			continue
		}
		if o.State == views.StateDrifted {
			t.Errorf("%s drifted without anyone touching it: %v %v", key, o.Drift, o.Removed)
		}
	}
	if st.Drifted != len(want) {
		t.Errorf("drifted %d, want %d", st.Drifted, len(want))
	}
	out, _, code = run(t, nil, "status", "-n", ns, "--release", v310)
	t.Logf("status --release after the edits:\n%s", out)
	if code != 3 || !strings.Contains(out, ".data.queue removed (the release sets it)") {
		t.Errorf("status --release human output: exit %d", code)
	}
	// Without the release the values are not compared, and it says so.
	if out, _, code := run(t, nil, "status", "-n", ns); code != 0 || !strings.Contains(out, "Release:     not compared") {
		t.Errorf("status without --release: exit %d\n%s", code, out)
	}
	// A release directory of another deployment than the Head's is refused.
	other := releaseCopy(t, "v3.1.1", ns, "")
	if _, stderr, code := run(t, nil, "status", "-n", ns, "--release", other); code != 2 || !strings.Contains(stderr, "is not the lock") {
		t.Errorf("status --release of another release: exit %d %s", code, stderr)
	}
}
