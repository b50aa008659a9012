package views

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// Status and Diff against a real kube-apiserver; the CLI tests in plugin
// cover the whole ceremony through the built binary.
var cp *testcluster.ControlPlane

func TestMain(m *testing.M) { testcluster.Main(m, testcluster.Options{AuditLog: true}, &cp) }

const testFM = "kubectl-ql3"

func cluster(t *testing.T) deploy.Cluster {
	t.Helper()
	c, err := deploy.NewKubeCluster(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func configMap(ns, name string, data map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"data":     data,
	}}
}

// applyingHead writes generation 1 of an install left applying, whose
// inventory is the given identities.
func applyingHead(t *testing.T, c deploy.Cluster, ns string, inv []inventory.Identity) *deploy.Head {
	t.Helper()
	ctx := context.Background()
	id, err := deploy.ReadClusterIdentity(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	inventory.SortIdentities(inv)
	invDigest, err := inventory.InventoryDigest(inv)
	if err != nil {
		t.Fatal(err)
	}
	d := func(ch string) string { return "sha256:" + strings.Repeat(ch, 64) }
	h := &deploy.Head{
		Schema: deploy.HeadSchema, Phase: deploy.PhaseApplying, Generation: 1,
		Transition: deploy.HeadTransition{Transition: receipts.Transition{Kind: deploy.TransitionInstall, CommandDigest: d("1"), PreflightDigest: d("2")},
			MutationID: strings.Repeat("ab", 16)},
		Current: deploy.HeadDeployment{Deployment: receipts.Deployment{Version: "1.0.0", LockDigest: d("3"), InventoryDigest: invDigest, InventoryCount: len(inv)}, Inventory: inv},
		Target:  receipts.Target{ClusterIdentity: id, Namespace: ns},
		Tool:    receipts.Tool{Name: deploy.ToolName, Version: "v0.1.0-test", FieldManager: testFM},
		Steps:   receipts.Steps{Identity: d("4"), DryRun: d("5")},
	}
	if err := h.Seal(); err != nil {
		t.Fatal(err)
	}
	cm, err := h.ConfigMap(ns)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Clientset().CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{FieldManager: deploy.HeadFieldManager}); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestStatusOnTheCluster(t *testing.T) {
	ctx := context.Background()
	c := cluster(t)
	ns := cp.Namespace(t)

	// No Head: invalid input, naming the namespace.
	if _, err := Status(ctx, c, ns, 4, nil); fail.ClassOf(err) != fail.Invalid || !strings.Contains(err.Error(), ns) {
		t.Fatalf("no Head: %v", err)
	}

	app := configMap(ns, "app", map[string]any{"level": "info"})
	if _, err := c.Apply(ctx, app, testFM, false, false); err != nil {
		t.Fatal(err)
	}
	gone := inventory.Identity{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "gone"}
	h := applyingHead(t, c, ns, []inventory.Identity{{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "app"}, gone})
	start := len(writes(t, ns))

	rep, err := Status(ctx, c, ns, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Applying == nil || rep.Applying.MutationID != h.Transition.MutationID || rep.Applying.Since == "" || !strings.Contains(rep.Applying.Resume, h.Transition.PreflightDigest) {
		t.Fatalf("applying Head: %+v", rep.Applying)
	}
	if rep.Missing != 1 || rep.Drifted != 0 || rep.Objects[1].Object != gone || rep.Objects[1].State != StateMissing || rep.Objects[0].State != StateInSync {
		t.Fatalf("objects: %+v", rep.Objects)
	}
	if fail.ClassOf(rep.Err()) != fail.Conflict {
		t.Fatalf("exit class of a missing object: %v", rep.Err())
	}
	if n := len(writes(t, ns)); n != start {
		t.Fatalf("status wrote %d time(s)", n-start)
	}

	// Someone else changes the applied value: drift, by manager.
	if _, err := cp.Clientset().CoreV1().ConfigMaps(ns).Update(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}, Data: map[string]string{"level": "debug"},
	}, metav1.UpdateOptions{FieldManager: "hotfixer"}); err != nil {
		t.Fatal(err)
	}
	rep, err = Status(ctx, c, ns, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o := rep.Objects[0]; o.State != StateDrifted || len(o.Drift) != 1 || o.Drift[0].Field != ".data.level" || o.Drift[0].Manager != "hotfixer" {
		t.Fatalf("drift: %+v", o)
	}

	// A tampered Head is tamper, as kubectl ql3 head says.
	cm, err := cp.Clientset().CoreV1().ConfigMaps(ns).Get(ctx, deploy.HeadName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[deploy.HeadKey] = strings.Replace(cm.Data[deploy.HeadKey], `"1.0.0"`, `"1.0.1"`, 1)
	if _, err := cp.Clientset().CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Status(ctx, c, ns, 4, nil); fail.ClassOf(err) != fail.Tamper {
		t.Fatalf("tampered Head: %v", err)
	}
}

func TestDiffOnTheCluster(t *testing.T) {
	ctx := context.Background()
	c := cluster(t)
	ns := cp.Namespace(t)
	if _, err := c.Apply(ctx, configMap(ns, "app", map[string]any{"level": "info", "same": "x"}), testFM, false, false); err != nil {
		t.Fatal(err)
	}
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "tok", "namespace": ns},
		"stringData": map[string]any{"token": "canary-3f9d1c"},
	}}
	start := len(writes(t, ns))
	rep, err := Diff(ctx, c, DiffRequest{Objects: []*unstructured.Unstructured{
		configMap(ns, "app", map[string]any{"level": "debug", "same": "x"}), secret,
	}, FieldManager: testFM, Parallelism: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Changed != 1 || rep.Created != 1 || rep.Objects[0].Change != Changed || rep.Objects[1].Change != Created {
		t.Fatalf("report: %+v", rep)
	}
	if !strings.Contains(rep.Objects[0].Diff, "-  level: info\n+  level: debug\n") || strings.Contains(rep.Objects[1].Diff, "canary") || !strings.Contains(rep.Objects[1].Diff, "token: "+ValueMasked) {
		t.Fatalf("diffs:\n%s\n%s", rep.Objects[0].Diff, rep.Objects[1].Diff)
	}
	if n := len(writes(t, ns)); n != start {
		t.Fatalf("diff wrote %d time(s)", n-start)
	}
	if _, err := cp.Clientset().CoreV1().Secrets(ns).Get(ctx, "tok", metav1.GetOptions{}); err == nil {
		t.Fatal("the dry-run created the Secret")
	}
	// A dry-run the API server refuses fails the diff as invalid input.
	bad := configMap(ns, "Bad_Name", map[string]any{"a": "b"})
	if _, err := Diff(ctx, c, DiffRequest{Objects: []*unstructured.Unstructured{bad}, FieldManager: testFM}); fail.ClassOf(err) != fail.Invalid {
		t.Fatalf("refused dry-run: %v", err)
	}
}

func writes(t *testing.T, ns string) []testcluster.AuditEvent {
	t.Helper()
	ws, err := cp.Writes(func(e testcluster.AuditEvent) bool { return e.ObjectRef.Namespace == ns })
	if err != nil {
		t.Fatal(err)
	}
	return ws
}
