// Package envbundle publishes an environment bundle
// (qinglong/environment-bundle@v1, ceremony/envbundle/envcarrier) as one Secret
// through the cas kernel, inspects it, and states the least privilege of
// publishing it (docs/env-bundle.md, "Publishing").
//
// The Secret holds the carrier under one fixed key and nothing about it in
// its metadata: no entry count, no names, no unkeyed digest. No error,
// report or progress line of this package contains a name, a value, a data
// key or a label value read from the cluster: a Secret that is not a bundle
// is described by the rule it breaks.
package envbundle

import (
	"bytes"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/qinglong/kubectl-ql3/ceremony/envbundle/envcarrier"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// The bundle Secret's key, labels and field manager (docs/env-bundle.md,
// "The Secret").
const (
	// Key is the one data key; its value is the carrier, byte for byte.
	Key = "environment-bundle.json"

	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "kubectl-ql3"
	// LabelRole marks the Secret's role. It is advisory only: a consumer
	// knows the role from its own reference to the Secret, never from this
	// label or from the payload.
	LabelRole = "qinglong.io/bundle-role"
	Role      = "environment-bundle"

	// FieldManager is the field manager of every write.
	FieldManager = "kubectl-ql3-env-bundle"
)

// ValidateName checks a bundle Secret's name (a DNS-1123 subdomain, as
// every Secret's name); flag names it in the error.
func ValidateName(flag, name string) error {
	if name == "" {
		return fail.Errorf(fail.Invalid, "%s: give the bundle Secret's name", flag)
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fail.Errorf(fail.Invalid, "%s %q is not a valid Secret name: %s", flag, name, errs[0])
	}
	return nil
}

// Labels are the labels publish sets, and the only metadata it adds.
func Labels() map[string]string { return map[string]string{LabelManagedBy: ManagedBy, LabelRole: Role} }

// SecretFor is the Secret holding b as name in ns. With cur (an update),
// it starts from cur — its other labels, annotations, owner references and
// finalizers are kept, its resourceVersion carried — and replaces the data
// and type; without cur it is a new Secret.
func SecretFor(ns, name string, b *envcarrier.Bundle, cur *corev1.Secret) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if cur != nil {
		s = cur.DeepCopy()
		s.ManagedFields = nil
	}
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	maps.Copy(s.Labels, Labels())
	s.Type = corev1.SecretTypeOpaque
	s.Data = map[string][]byte{Key: b.Bytes()}
	s.StringData = nil
	return s
}

// Managed reports whether s carries publish's managed-by label.
func Managed(s *corev1.Secret) bool { return s.Labels[LabelManagedBy] == ManagedBy }

// Check validates a bundle Secret read from the cluster: publish's two
// labels, type Opaque, not being deleted, not immutable, data of exactly
// Key holding a valid carrier (envcarrier.Parse: every rule, canonical
// bytes). A Secret without the managed-by label was not published by
// kubectl-ql3 and cannot be adopted: fail.Invalid. A managed one that
// breaks a rule was changed behind publish's back: fail.Tamper. Errors
// never show a data key, a label value or any byte of the data.
func Check(s *corev1.Secret) (*envcarrier.Bundle, error) {
	ref := "environment bundle Secret " + s.Namespace + "/" + s.Name
	if !Managed(s) {
		return nil, fail.Errorf(fail.Invalid, "%s exists but was not published by kubectl-ql3 (no label %s=%s): it cannot be adopted; delete it or publish under another --name", ref, LabelManagedBy, ManagedBy)
	}
	bad := func(format string, args ...any) (*envcarrier.Bundle, error) {
		return nil, fail.Errorf(fail.Tamper, "%s was changed outside kubectl ql3 env-bundle publish: "+format+"; inspect it, then delete it and publish again", append([]any{ref}, args...)...)
	}
	_, hasKey := s.Data[Key]
	switch {
	case s.Labels[LabelRole] != Role:
		return bad("its label %s is not %q", LabelRole, Role)
	case s.DeletionTimestamp != nil:
		return bad("it is being deleted")
	case s.Immutable != nil && *s.Immutable:
		return bad("it is immutable")
	case s.Type != corev1.SecretTypeOpaque:
		return bad("its type is not %q", corev1.SecretTypeOpaque)
	case len(s.Data) != 1 || !hasKey:
		return bad("its data must hold exactly the key %q (it holds %d keys)", Key, len(s.Data))
	}
	b, err := envcarrier.Parse(s.Data[Key])
	if err != nil {
		return nil, fail.Wrap(fail.Tamper, fmt.Errorf("%s: the data under %q is not a valid environment bundle: %w", ref, Key, err))
	}
	return b, nil
}

// Holds reports whether s is a valid bundle Secret holding exactly b.
func Holds(s *corev1.Secret, b *envcarrier.Bundle) bool {
	if _, err := Check(s); err != nil {
		return false
	}
	return bytes.Equal(s.Data[Key], b.Bytes())
}
