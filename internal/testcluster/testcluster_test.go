package testcluster

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

var cp *ControlPlane

func TestMain(m *testing.M) { Main(m, Options{AuditLog: true, OIDC: true}, &cp) }

// The control plane enforces resourceVersion compare-and-swap: an update
// carrying a stale resourceVersion is a 409, and server-side apply works.
func TestServerSideApplyAndStaleUpdateConflict(t *testing.T) {
	ns := cp.Namespace(t)
	cs := cp.Clientset()
	ctx := context.Background()

	body, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cas", "namespace": ns},
		"data":     map[string]any{"k": "v1"},
	})
	force := true
	applied, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, "cas", types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: "ql3-test", Force: &force})
	if err != nil {
		t.Fatalf("server-side apply: %v", err)
	}
	if len(applied.ManagedFields) != 1 || applied.ManagedFields[0].Manager != "ql3-test" ||
		applied.ManagedFields[0].Operation != metav1.ManagedFieldsOperationApply {
		t.Fatalf("managed fields = %+v, want one Apply entry by ql3-test", applied.ManagedFields)
	}

	first := applied.DeepCopy()
	first.Data["k"] = "v2"
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, first, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update with fresh resourceVersion: %v", err)
	}
	stale := applied.DeepCopy() // still carries the old resourceVersion
	stale.Data["k"] = "v3"
	_, err = cs.CoreV1().ConfigMaps(ns).Update(ctx, stale, metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) {
		t.Fatalf("update with stale resourceVersion: err = %v, want 409 Conflict", err)
	}
	got, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "cas", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data["k"] != "v2" {
		t.Fatalf("data = %q, want the first writer's v2 to survive", got.Data["k"])
	}

	// A create of an existing name is a 409 too (AlreadyExists).
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cas"}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create existing: err = %v, want AlreadyExists", err)
	}
}

// A restricted user (client certificate, no groups) is authenticated but
// RBAC forbids it everything it was not granted.
func TestRestrictedUserIsForbidden(t *testing.T) {
	ns := cp.Namespace(t)
	path, err := cp.Kubeconfig("ql3-restricted")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = cs.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("list configmaps as restricted user: err = %v, want 403 Forbidden", err)
	}
	var status *apierrors.StatusError
	if se, ok := err.(*apierrors.StatusError); ok {
		status = se
	}
	if status == nil || status.ErrStatus.Details == nil {
		t.Fatalf("forbidden error carries no details: %#v", err)
	}
}

func TestAuditLogRecordsWrites(t *testing.T) {
	ns := cp.Namespace(t)
	if _, err := cp.Clientset().CoreV1().ConfigMaps(ns).Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "audited"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(cp.AuditLogPath)
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	events, err := ParseAuditLog(data)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, e := range events {
		if e.Verb == "create" && e.ObjectRef.Resource == "configmaps" && e.ObjectRef.Namespace == ns && e.ObjectRef.Name == "audited" {
			found = e.User.Username == "ql3-admin"
		}
	}
	if !found {
		t.Fatalf("audit log has no create of configmaps/%s/audited by ql3-admin", ns)
	}
}

// Reads are recorded per user (get, list), so a test can prove that a
// user never read an object or never listed.
func TestAuditLogRecordsReads(t *testing.T) {
	ns := cp.Namespace(t)
	cfg, err := cp.UserConfig("reader", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	_, _ = cs.CoreV1().ConfigMaps(ns).Get(ctx, "probe", metav1.GetOptions{})
	if _, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	reads, err := cp.Reads(func(e AuditEvent) bool { return e.User.Username == "reader" && e.ObjectRef.Namespace == ns })
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range reads {
		got = append(got, e.Verb+" "+e.ObjectRef.Resource+"/"+e.ObjectRef.Name)
	}
	if len(got) != 2 || got[0] != "get configmaps/probe" || got[1] != "list secrets/" {
		t.Fatalf("reads recorded: %q, want the get and the list", got)
	}
}

// TestNeedsCluster: `go test -fuzz` (coordinator and worker) and -list start
// no control plane, so `make fuzz` runs on a fresh clone; every other run
// does. The arguments are those `go test` passes to the test binary.
func TestNeedsCluster(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want bool
	}{
		{[]string{"-test.paniconexit0", "-test.timeout=10m0s", "-test.count=1"}, true},
		{[]string{"-test.run=^TestX$", "-test.v=true"}, true},
		{[]string{"-test.fuzzcachedir=/tmp/c", "-test.run=^$"}, true},
		{[]string{"-test.paniconexit0", "-test.fuzzcachedir=/tmp/c", "-test.fuzz=^FuzzParse$", "-test.fuzztime=30s", "-test.run=^$"}, false},
		{[]string{"-test.fuzzworker", "-test.fuzz=^FuzzParse$"}, false},
		{[]string{"-test.list", "^Fuzz"}, false},
		{[]string{"--test.fuzz", "FuzzParse"}, false},
	} {
		if got := NeedsCluster(tt.args); got != tt.want {
			t.Errorf("NeedsCluster(%q) = %t, want %t", tt.args, got, tt.want)
		}
	}
}
