package access

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// A binding's name is its role's plus the hash of exactly the subjects it
// binds: another user, group, kind or role gives another name; the same
// ones the same name.
func TestBindingName(t *testing.T) {
	// The documented input, written out by hand.
	sum := sha256.Sum256([]byte(`[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"u1"}]`))
	if got, want := BindingName("r", Subjects(Subject{User: "u1"})), "r-"+hex.EncodeToString(sum[:])[:SubjectHashLen]; got != want {
		t.Fatalf("BindingName = %q, want %q", got, want)
	}
	names := map[string]string{}
	for _, tt := range []struct {
		role string
		subj Subject
	}{
		{"r", Subject{User: "u1"}},
		{"r", Subject{User: "u2"}},
		{"r", Subject{Group: "u1"}},
		{"r", Subject{User: "u1", Group: "g"}},
		{"r", Subject{User: "u1", Group: "g2"}},
		{"r2", Subject{User: "u1"}},
		{"r", Subject{User: "system:serviceaccount:ns:sa/x"}},
	} {
		b := Binding(tt.subj, tt.role, "ns", nil).(*rbacv1.RoleBinding)
		if prev, dup := names[b.Name]; dup {
			t.Errorf("%+v and %s share the binding name %q", tt, prev, b.Name)
		}
		names[b.Name] = tt.role + " " + tt.subj.User + " " + tt.subj.Group
		if b.RoleRef.Name != tt.role || !strings.HasPrefix(b.Name, tt.role+"-") || len(b.Name) != len(tt.role)+1+SubjectHashLen {
			t.Errorf("%+v: binding %q of role %q", tt, b.Name, b.RoleRef.Name)
		}
		if again := Binding(tt.subj, tt.role, "", nil).(*rbacv1.ClusterRoleBinding); again.Name != b.Name {
			t.Errorf("%+v: cluster binding %q, role binding %q", tt, again.Name, b.Name)
		}
	}
	if Binding(Subject{}, "r", "ns", nil) != nil {
		t.Error("a binding of nobody")
	}
}

func TestCheckRoleName(t *testing.T) {
	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"ql3-keyset-publisher", true},
		{"kubectl-ql3-deployer:ql3-demo", true},
		{strings.Repeat("a", MaxRoleName), true},
		{strings.Repeat("a", MaxRoleName+1), false},
		{"a/b", false},
		{"..", false},
		{"a%b", false},
	} {
		err := CheckRoleName("--flag", tt.name)
		if (err == nil) != tt.ok || (err != nil && (!fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "--flag"))) {
			t.Errorf("CheckRoleName(%q): %v, want ok %v", tt.name, err, tt.ok)
		}
	}
}
