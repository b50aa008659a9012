package testcluster

import (
	"context"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// The helpers below are the ones every real-cluster test package needs:
// one user per simulated operator, the least privilege a command prints
// (less one verb, to prove it fails closed), and the writes the API
// server's audit log saw from a user.

// User is UserConfig for a test: a client configuration for user (with
// the given groups), failing the test when it cannot be minted.
func (cp *ControlPlane) User(t testing.TB, user string, groups ...string) *rest.Config {
	t.Helper()
	cfg, err := cp.UserConfig(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Grant creates role and binding in ns as the admin, first removing the
// verb drop from every rule of role (and the rules left with no verb);
// drop "" grants role as given. role is modified.
func (cp *ControlPlane) Grant(t testing.TB, ns string, role *rbacv1.Role, binding *rbacv1.RoleBinding, drop string) {
	t.Helper()
	var rules []rbacv1.PolicyRule
	for _, r := range role.Rules {
		r.Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == drop })
		if len(r.Verbs) > 0 {
			rules = append(rules, r)
		}
	}
	role.Rules = rules
	admin := cp.Clientset()
	ctx := context.Background()
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// WritesBy is Writes for a test: the completed writes user sent in
// namespace ns (every resource), in the order the API server logged them.
func (cp *ControlPlane) WritesBy(t testing.TB, user, ns string) []AuditEvent {
	t.Helper()
	evs, err := cp.Writes(func(e AuditEvent) bool {
		return e.User.Username == user && e.ObjectRef.Namespace == ns
	})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// WriteVerbs is the verbs of the writes user sent for resource in ns.
func (cp *ControlPlane) WriteVerbs(t testing.TB, user, ns, resource string) []string {
	t.Helper()
	var out []string
	for _, e := range cp.WritesBy(t, user, ns) {
		if e.ObjectRef.Resource == resource {
			out = append(out, e.Verb)
		}
	}
	return out
}

// NoWrites fails the test when user sent any write for resource in ns: a
// refusal must come before every write.
func (cp *ControlPlane) NoWrites(t testing.TB, user, ns, resource string) {
	t.Helper()
	if vs := cp.WriteVerbs(t, user, ns, resource); len(vs) > 0 {
		t.Fatalf("%s sent %v of %s in %s: the refusal was not before every write", user, vs, resource, ns)
	}
}
