// Package pointer publishes and inspects a plugin package's active pointer
// (ADR-0139, docs/package-pointer.md "The pointer on the cluster"): one
// bounded, mutable ConfigMap per target, written only through the cas
// kernel — create when absent, update carrying the resourceVersion of the
// read that was validated — and re-validated on every read.
//
// It imports cas, the pure ceremony/package/intent and client-go; never ceremony
// or plugin. The stage evidence comes through the intent.StageVerifier
// port (ceremony/package/stagelayout implements it over an OCI layout).
package pointer

import (
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/package/intent"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// The pointer ConfigMap's exact labels (docs/package-pointer.md).
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "kubectl-ql3"
	// LabelSchema holds SchemaValue: intent.ActiveSchema in label syntax.
	LabelSchema = "qinglong.io/package-active-schema"
	SchemaValue = "plugin-package-active.v1"
	// FieldManager is the field manager of every write.
	FieldManager = "kubectl-ql3-package"
)

// Labels are the pointer's exact labels for naming nm.
func Labels(nm intent.Naming) map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy, LabelSchema: SchemaValue, intent.TargetLabel: nm.Label}
}

// ConfigMapFor is the pointer ConfigMap activating in at `at`: the name
// and labels of its target, one annotation (the intent digest), data of
// exactly active.json, nothing else (no binaryData, finalizer, owner,
// immutable).
func ConfigMapFor(in intent.Intent, at time.Time) (*corev1.ConfigMap, *intent.Active, error) {
	a, data, err := intent.BuildActive(in, at)
	if err != nil {
		return nil, nil, err
	}
	nm, err := intent.NamingOf(a.Intent)
	if err != nil {
		return nil, nil, err
	}
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: nm.Name, Namespace: a.Intent.Namespace, Labels: Labels(nm),
			Annotations: map[string]string{intent.IntentDigestAnnotation: a.Receipt.IntentDigest},
		},
		Data: map[string]string{intent.ActiveKey: string(data)},
	}
	return cm, a, nil
}

// Check re-validates a pointer ConfigMap read from the cluster: no
// deletion timestamp, finalizer, owner reference, binaryData or immutable
// field; exactly the three labels, the one annotation and the one data
// key; active.json as intent.ParseActive reads it; the target recomputed
// from its intent equal to the name and the label (intent.VerifyNaming);
// its namespace the ConfigMap's; the annotation its intent digest. Any
// failure is fail.Tamper: the pointer was changed outside kubectl ql3
// package activate (or a name collides), and it is never used or
// overwritten.
func Check(cm *corev1.ConfigMap) (*intent.Active, error) {
	ref := "active pointer ConfigMap " + cm.Namespace + "/" + cm.Name
	bad := func(format string, args ...any) (*intent.Active, error) {
		return nil, fail.Errorf(fail.Tamper, "%s was changed outside kubectl ql3 package activate: "+format+"; it is left untouched: inspect who wrote it (kubectl get configmap -o yaml) before anything else", append([]any{ref}, args...)...)
	}
	switch {
	case cm.DeletionTimestamp != nil:
		return bad("it is being deleted")
	case len(cm.Finalizers) > 0:
		return bad("it has finalizers %q", cm.Finalizers)
	case len(cm.OwnerReferences) > 0:
		return bad("it has %d owner reference(s)", len(cm.OwnerReferences))
	case len(cm.BinaryData) > 0:
		return bad("it has binaryData")
	case cm.Immutable != nil:
		return bad("its immutable field is set")
	case len(cm.Data) != 1 || cm.Data[intent.ActiveKey] == "":
		return bad("its data must hold exactly the key %q (it holds %d keys)", intent.ActiveKey, len(cm.Data))
	case len(cm.Annotations) != 1 || cm.Annotations[intent.IntentDigestAnnotation] == "":
		return bad("its annotations must be exactly %s (it has %d)", intent.IntentDigestAnnotation, len(cm.Annotations))
	}
	a, err := intent.ParseActive([]byte(cm.Data[intent.ActiveKey]))
	if err != nil {
		return bad("%s is not a valid active pointer document: %v", intent.ActiveKey, err)
	}
	if err := intent.VerifyNaming(a.Intent, cm.Name, cm.Labels[intent.TargetLabel]); err != nil {
		return nil, err
	}
	nm, _ := intent.NamingOf(a.Intent)
	if !maps.Equal(cm.Labels, Labels(nm)) {
		return bad("its labels must be exactly %s=%s, %s=%s and %s", LabelManagedBy, ManagedBy, LabelSchema, SchemaValue, intent.TargetLabel)
	}
	if a.Intent.Namespace != cm.Namespace {
		return bad("it holds an intent for namespace %q", a.Intent.Namespace)
	}
	if got := cm.Annotations[intent.IntentDigestAnnotation]; got != a.Receipt.IntentDigest {
		return bad("annotation %s=%q is not its intent's digest %s", intent.IntentDigestAnnotation, got, a.Receipt.IntentDigest)
	}
	return a, nil
}

// Holds reports whether cm is a valid pointer holding exactly in (its
// activation time aside).
func Holds(cm *corev1.ConfigMap, in intent.Intent) bool {
	a, err := Check(cm)
	return err == nil && Same(a.Intent, in)
}

// Same reports whether a and b are the same intent (equal digests).
func Same(a, b intent.Intent) bool {
	da, err1 := intent.Digest(a)
	db, err2 := intent.Digest(b)
	return err1 == nil && err2 == nil && da == db
}
