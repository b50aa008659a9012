package keyset

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

func TestLedgerSecret(t *testing.T) {
	l := ledgerOf(t, gen(t, 1, []string{"a"}), gen(t, 2, []string{"a", "b"}))
	good, err := LedgerSecretFor("ns", l)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseLedgerSecret(good)
	if err != nil || got.Highest() != l.Highest() {
		t.Fatalf("round trip: %v", err)
	}
	now := metav1.Now()
	yes := true
	tests := []struct {
		name    string
		edit    func(s *corev1.Secret)
		wantErr string
	}{
		{"being deleted", func(s *corev1.Secret) { s.DeletionTimestamp = &now }, "being deleted"},
		{"finalizer", func(s *corev1.Secret) { s.Finalizers = []string{"x"} }, "finalizers"},
		{"owner", func(s *corev1.Secret) { s.OwnerReferences = []metav1.OwnerReference{{Name: "x"}} }, "owner references"},
		{"immutable", func(s *corev1.Secret) { s.Immutable = &yes }, "immutable"},
		{"type", func(s *corev1.Secret) { s.Type = corev1.SecretTypeTLS }, "has type"},
		{"labels", func(s *corev1.Secret) { s.Labels["extra"] = "x" }, "labels must be exactly"},
		{"annotations", func(s *corev1.Secret) { s.Annotations = map[string]string{"a": "b"} }, "annotations"},
		{"extra key", func(s *corev1.Secret) { s.Data["x"] = []byte("y") }, "exactly the key"},
		{"document edited", func(s *corev1.Secret) {
			s.Data[LedgerKey] = []byte(strings.Replace(string(s.Data[LedgerKey]), `"generation":2`, `"generation":1`, 1))
		}, "keyset ledger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := good.DeepCopy()
			tt.edit(s)
			_, err := ParseLedgerSecret(s)
			if !fail.Is(err, fail.Tamper) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParseLedgerSecret: %v, want tamper containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestKeysetSecret(t *testing.T) {
	k := gen(t, 2, []string{"a"})
	cur := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: KeysetSecret, ResourceVersion: "7",
		Labels: map[string]string{"team": "id"}, Annotations: map[string]string{"reloader": "on"},
		Finalizers:      []string{"example.com/backup"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "u"}}}}
	s, err := KeysetSecretFor("ns", k, cur)
	if err != nil {
		t.Fatal(err)
	}
	// An update replaces the whole object: what other controllers own
	// (finalizers, owner references) must be carried, never stripped.
	if s.ResourceVersion != "7" || s.Labels["team"] != "id" || s.Annotations["reloader"] != "on" || s.Labels[LabelRole] != RoleKeyset ||
		len(s.Finalizers) != 1 || len(s.OwnerReferences) != 1 {
		t.Fatalf("update does not carry the read's resourceVersion and foreign metadata: %+v", s.ObjectMeta)
	}
	got, managed, err := ParseKeysetSecret(s)
	if err != nil || !managed || got.Generation != 2 {
		t.Fatalf("round trip: %v %v", managed, err)
	}
	yes := true
	tests := []struct {
		name    string
		edit    func(s *corev1.Secret)
		class   fail.Class
		wantErr string
	}{
		{"role label", func(s *corev1.Secret) { s.Labels[LabelRole] = RoleLedger }, fail.Tamper, "label qinglong.io/keyset-role"},
		{"immutable", func(s *corev1.Secret) { s.Immutable = &yes }, fail.Tamper, "immutable"},
		{"extra key", func(s *corev1.Secret) { s.Data["other"] = nil }, fail.Tamper, "exactly the key"},
		{"invalid keyset", func(s *corev1.Secret) { s.Data[KeysetKey] = []byte(`{"generation":0}`) }, fail.Tamper, "keyset:"},
		{"unmanaged and invalid", func(s *corev1.Secret) { s.Labels = nil; s.Data[KeysetKey] = []byte(`[]`) }, fail.Invalid, "keyset:"},
		{"unmanaged, another shape", func(s *corev1.Secret) { s.Labels = nil; s.Type = corev1.SecretTypeTLS }, fail.Invalid, "cannot be adopted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := s.DeepCopy()
			tt.edit(c)
			_, _, err := ParseKeysetSecret(c)
			if !fail.Is(err, tt.class) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParseKeysetSecret: %v, want %v containing %q", err, tt.class, tt.wantErr)
			}
		})
	}
}
