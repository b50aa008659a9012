package pointer

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/ceremony/package/intent"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

var at = time.Date(2026, 7, 24, 1, 30, 0, 0, time.UTC)

// offline is an intent on a fixed cluster (no control plane needed).
func offline(gen int64, name, prev string) intent.Intent {
	in := intent.Intent{
		Schema: intent.Schema, ClusterIdentity: canon.ClusterIdentity("6a1f2e1c-3b5d-4c8e-9f70-2d4b6a8c0e12"), Namespace: "qinglong",
		ProjectID: "demo", PackageID: "weather-tools", Generation: gen, LockDigest: lock(name),
		StageReference:        "registry.example.com/qinglong/packages/demo@" + canon.DigestBytes("test-manifest", []byte(name)),
		StageReceiptDigest:    canon.DigestBytes("test-receipt", []byte(name)),
		AdapterEvidenceDigest: canon.DigestBytes("test-config", []byte(name)),
		ContentDigest:         canon.DigestBytes("test-bundle", []byte(name)),
	}
	if prev != "" {
		p := lock(prev)
		in.PreviousLockDigest = &p
	}
	return in
}

func TestConfigMapForIsExact(t *testing.T) {
	in := offline(1, "a", "")
	cm, a, err := ConfigMapFor(in, at)
	if err != nil {
		t.Fatal(err)
	}
	nm, _ := intent.NamingOf(in)
	d, _ := intent.Digest(in)
	_, data, _ := intent.BuildActive(in, at)
	if cm.Name != nm.Name || cm.Namespace != "qinglong" || len(cm.Labels) != 3 || cm.Labels[intent.TargetLabel] != nm.Label ||
		cm.Annotations[intent.IntentDigestAnnotation] != d || len(cm.Annotations) != 1 || cm.Data[intent.ActiveKey] != string(data) || len(cm.Data) != 1 ||
		cm.Immutable != nil || cm.BinaryData != nil || a.Receipt.IntentDigest != d {
		t.Fatalf("ConfigMapFor: %+v", cm)
	}
	got, err := Check(cm)
	if err != nil || !Same(got.Intent, in) || !Holds(cm, in) || Holds(cm, offline(1, "b", "")) {
		t.Fatalf("Check of a fresh pointer: %v", err)
	}
}

// Check's rules: each edit of a valid pointer is tamper.
func TestCheckRules(t *testing.T) {
	other := offline(1, "z", "")
	other.PackageID = "other"
	otherCM, _, _ := ConfigMapFor(other, at)
	now := metav1.Now()
	f := false
	for _, tc := range []struct {
		name string
		edit func(cm *corev1.ConfigMap)
		want string
	}{
		{"deletion", func(cm *corev1.ConfigMap) { cm.DeletionTimestamp = &now }, "being deleted"},
		{"finalizer", func(cm *corev1.ConfigMap) { cm.Finalizers = []string{"x/y"} }, "finalizers"},
		{"owner", func(cm *corev1.ConfigMap) { cm.OwnerReferences = []metav1.OwnerReference{{Name: "x"}} }, "owner"},
		{"binaryData", func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"a": nil} }, "binaryData"},
		{"immutable", func(cm *corev1.ConfigMap) { cm.Immutable = &f }, "immutable"},
		{"no data", func(cm *corev1.ConfigMap) { cm.Data = nil }, "exactly the key"},
		{"extra key", func(cm *corev1.ConfigMap) { cm.Data["x"] = "1" }, "exactly the key"},
		{"no annotation", func(cm *corev1.ConfigMap) { cm.Annotations = nil }, "annotations"},
		{"extra annotation", func(cm *corev1.ConfigMap) { cm.Annotations["x"] = "1" }, "annotations"},
		{"annotation drift", func(cm *corev1.ConfigMap) { cm.Annotations[intent.IntentDigestAnnotation] = lock("q") }, "not its intent's digest"},
		{"extra label", func(cm *corev1.ConfigMap) { cm.Labels["x"] = "1" }, "labels must be exactly"},
		{"managed-by", func(cm *corev1.ConfigMap) { cm.Labels[LabelManagedBy] = "helm" }, "labels must be exactly"},
		{"label drift", func(cm *corev1.ConfigMap) { cm.Labels[intent.TargetLabel] = "x" }, "does not encode target"},
		{"not canonical", func(cm *corev1.ConfigMap) { cm.Data[intent.ActiveKey] = " " + cm.Data[intent.ActiveKey] }, "not a valid active pointer"},
		{"another target", func(cm *corev1.ConfigMap) { cm.Data, cm.Annotations = otherCM.Data, otherCM.Annotations }, "holds an intent for target"},
		{"renamed", func(cm *corev1.ConfigMap) { cm.Name = otherCM.Name }, "holds an intent for target"},
		{"moved", func(cm *corev1.ConfigMap) { cm.Namespace = "elsewhere" }, "namespace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm, _, _ := ConfigMapFor(offline(1, "a", ""), at)
			tc.edit(cm)
			if _, err := Check(cm); !fail.Is(err, fail.Tamper) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want tamper %q", err, tc.want)
			}
		})
	}
}

func TestNext(t *testing.T) {
	g1 := offline(1, "a", "")
	tg, _ := intent.TargetOf(g1)
	got, err := Next(tg, nil, g1.Evidence())
	if err != nil || !Same(got, g1) {
		t.Fatalf("first: %+v %v", got, err)
	}
	a, _, _ := intent.BuildActive(g1, at)
	g2 := offline(2, "b", "a")
	if got, err = Next(tg, a, g2.Evidence()); err != nil || !Same(got, g2) {
		t.Fatalf("second: %+v %v", got, err)
	}
	// The stage already active: the active intent itself (activate replays).
	if got, err = Next(tg, a, g1.Evidence()); err != nil || !Same(got, g1) {
		t.Fatalf("already active: %+v %v", got, err)
	}
}

func TestRBACIsLeast(t *testing.T) {
	nm, _ := intent.NamingOf(offline(1, "a", ""))
	objs := RBAC(nm, "qinglong", Subject{User: "pub"})
	out, err := yaml.Marshal(objs)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, bad := range []string{"list", "watch", "patch", "delete", "secrets"} {
		if strings.Contains(s, "- "+bad+"\n") {
			t.Errorf("the roles grant %s:\n%s", bad, s)
		}
	}
	if len(objs) != 4 || !strings.Contains(s, "- "+nm.Name) || !strings.Contains(s, "- kube-system") {
		t.Fatalf("RBAC:\n%s", s)
	}
	if len(RBAC(nm, "qinglong", Subject{})) != 2 {
		t.Fatal("no subject: want the Role and the ClusterRole only")
	}
}

// FuzzCheck: Check never panics, and whatever it accepts is a pointer it
// would write itself (same name, labels, annotation and data).
func FuzzCheck(f *testing.F) {
	cm, _, _ := ConfigMapFor(offline(2, "b", "a"), at)
	f.Add(cm.Name, cm.Labels[intent.TargetLabel], cm.Annotations[intent.IntentDigestAnnotation], cm.Data[intent.ActiveKey])
	f.Add(cm.Name, "x", "y", "{}")
	f.Fuzz(func(t *testing.T, name, label, ann, data string) {
		in := cm.DeepCopy()
		in.Name, in.Labels[intent.TargetLabel], in.Annotations[intent.IntentDigestAnnotation], in.Data[intent.ActiveKey] = name, label, ann, data
		a, err := Check(in)
		if err != nil {
			if !fail.Is(err, fail.Tamper) {
				t.Fatalf("class %v: %v", fail.ClassOf(err), err)
			}
			return
		}
		at, _ := time.Parse(time.RFC3339, a.Receipt.ActivatedAt)
		want, _, err := ConfigMapFor(a.Intent, at)
		if err != nil || want.Name != in.Name || want.Data[intent.ActiveKey] != data || want.Labels[intent.TargetLabel] != label || want.Annotations[intent.IntentDigestAnnotation] != ann {
			t.Fatalf("accepted a pointer it would not write: %v", err)
		}
	})
}
