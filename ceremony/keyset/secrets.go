// Package keyset publishes identity keyset generations to a namespace
// through a durable ledger (docs/keyset.md, "Publishing"): the ledger
// Secret remembers the highest generation in full and the digest of every
// generation ever published, and is written first; the keyset Secret the
// management host mounts is written second. Both writes are compare-and-swap
// writes of the cas kernel. Every rule is judged against the ledger before
// anything is written, so a rollback, a rewrite, an implicit key removal,
// an un-appended revocation or a revoked key under a new key ID (by its
// thumbprint) is refused even when no replica remembers anything.
package keyset

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/keyset/jwkset"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// The two Secrets' names, keys and labels (docs/keyset.md, "The Secrets").
const (
	// KeysetSecret is the Secret the management host mounts (the operation
	// audit's identity Secret); KeysetKey holds the keyset file.
	KeysetSecret = "ql3-plugin-package-management-identity"
	KeysetKey    = "keyset.json"
	// LedgerSecret is the ledger; LedgerKey holds its canonical document.
	LedgerSecret = "ql3-plugin-package-management-identity-ledger"
	LedgerKey    = "ledger.json"

	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "kubectl-ql3"
	LabelRole      = "qinglong.io/keyset-role"
	RoleLedger     = "ledger"
	RoleKeyset     = "keyset"

	// FieldManager is the field manager of every write.
	FieldManager = "kubectl-ql3-keyset"
)

func ledgerLabels() map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy, LabelRole: RoleLedger}
}

// LedgerSecretFor is the ledger Secret holding l in namespace ns.
func LedgerSecretFor(ns string, l *jwkset.Ledger) (*corev1.Secret, error) {
	data, err := l.Bytes()
	if err != nil {
		return nil, err
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: LedgerSecret, Namespace: ns, Labels: ledgerLabels()},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{LedgerKey: data},
	}, nil
}

func tamperf(format string, args ...any) error {
	return fail.Errorf(fail.Tamper, format, args...)
}

// ParseLedgerSecret validates the ledger Secret exactly: no deletion,
// finalizers, owner references or immutability, type Opaque, exactly the
// ledger labels and no annotations, data of exactly ledger.json holding a
// valid canonical ledger. Anything else is fail.Tamper: only a publisher
// writes the ledger, and it writes only this shape.
func ParseLedgerSecret(s *corev1.Secret) (*jwkset.Ledger, error) {
	ref := "keyset ledger " + s.Namespace + "/" + s.Name
	switch {
	case s.DeletionTimestamp != nil:
		return nil, tamperf("%s is being deleted", ref)
	case len(s.Finalizers) > 0:
		return nil, tamperf("%s has finalizers %q", ref, s.Finalizers)
	case len(s.OwnerReferences) > 0:
		return nil, tamperf("%s has owner references", ref)
	case s.Immutable != nil:
		return nil, tamperf("%s sets immutable", ref)
	case s.Type != corev1.SecretTypeOpaque:
		return nil, tamperf("%s has type %q, want %q", ref, s.Type, corev1.SecretTypeOpaque)
	case !maps.Equal(s.Labels, ledgerLabels()):
		return nil, tamperf("%s: labels must be exactly %v, got %v", ref, ledgerLabels(), s.Labels)
	case len(s.Annotations) > 0:
		return nil, tamperf("%s: has annotations %v; a ledger has none", ref, slices.Sorted(maps.Keys(s.Annotations)))
	case len(s.Data) != 1 || s.Data[LedgerKey] == nil:
		return nil, tamperf("%s: data must hold exactly the key %q, got %v", ref, LedgerKey, slices.Sorted(maps.Keys(s.Data)))
	}
	l, err := jwkset.ParseLedger(s.Data[LedgerKey])
	if err != nil {
		return nil, fail.Wrap(fail.Tamper, fmt.Errorf("%s: %w", ref, err))
	}
	return l, nil
}

// KeysetSecretFor is the keyset Secret holding k in namespace ns. When the
// Secret exists (cur), the update starts from it — its resourceVersion,
// labels, annotations, owner references and finalizers, which other
// controllers may own, are kept — and only data and our labels change.
func KeysetSecretFor(ns string, k *jwkset.Keyset, cur *corev1.Secret) (*corev1.Secret, error) {
	data, err := k.Encode()
	if err != nil {
		return nil, err
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: KeysetSecret, Namespace: ns}}
	if cur != nil {
		s = cur.DeepCopy()
		s.ManagedFields = nil
	}
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Type = corev1.SecretTypeOpaque
	s.Data = map[string][]byte{KeysetKey: data}
	s.StringData = nil
	s.Labels[LabelManagedBy] = ManagedBy
	s.Labels[LabelRole] = RoleKeyset
	return s, nil
}

// ParseKeysetSecret reads the keyset Secret: type Opaque, not being
// deleted, not immutable, data of exactly keyset.json holding a valid
// keyset. managed reports whether a publisher wrote it (the labels
// managed-by kubectl-ql3 and keyset-role keyset). A managed Secret that
// breaks a rule is fail.Tamper; an unmanaged one (a Secret created before
// the first publish) is fail.Invalid: it cannot be adopted as it is.
func ParseKeysetSecret(s *corev1.Secret) (k *jwkset.Keyset, managed bool, err error) {
	ref := "keyset Secret " + s.Namespace + "/" + s.Name
	managed = s.Labels[LabelManagedBy] == ManagedBy
	class := fail.Invalid
	if managed {
		class = fail.Tamper
	}
	bad := func(format string, args ...any) (*jwkset.Keyset, bool, error) {
		if !managed {
			format += " (it was not published by kubectl-ql3 and cannot be adopted as it is)"
		}
		return nil, managed, fail.Errorf(class, ref+": "+format, args...)
	}
	switch {
	case managed && s.Labels[LabelRole] != RoleKeyset:
		return bad("label %s is %q, want %q", LabelRole, s.Labels[LabelRole], RoleKeyset)
	case s.DeletionTimestamp != nil:
		return bad("is being deleted")
	case s.Immutable != nil && *s.Immutable:
		return bad("is immutable")
	case s.Type != corev1.SecretTypeOpaque:
		return bad("has type %q, want %q", s.Type, corev1.SecretTypeOpaque)
	case len(s.Data) != 1 || s.Data[KeysetKey] == nil:
		return bad("data must hold exactly the key %q, got %v", KeysetKey, slices.Sorted(maps.Keys(s.Data)))
	}
	k, err = jwkset.Parse(s.Data[KeysetKey])
	if err != nil {
		return nil, managed, fail.Wrap(class, fmt.Errorf("%s: %w", ref, err))
	}
	return k, managed, nil
}
