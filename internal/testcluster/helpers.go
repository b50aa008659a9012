package testcluster

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// The helpers below are the ones every real-cluster test package needs:
// one user per simulated operator and the writes the API server's audit
// log saw from a user; rbac.go grants what a command prints, lessone.go
// less one verb to prove it fails closed.

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

// KubeSystemUID is the UID of the kube-system Namespace, read as the
// admin: what the cluster identity is computed from
// (canon.ClusterIdentity).
func (cp *ControlPlane) KubeSystemUID(t testing.TB) string {
	t.Helper()
	ns, err := cp.Clientset().CoreV1().Namespaces().Get(context.Background(), metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(ns.UID)
}

// GrantPrinted creates, as the admin, the objects an rbac command printed
// (Roles, RoleBindings, ClusterRoles, ClusterRoleBindings, as pointers);
// the cluster-wide ones get suffix added to their names (and the
// bindings' roleRef) so that tests in other namespaces do not share them,
// and are deleted when t ends.
func (cp *ControlPlane) GrantPrinted(t testing.TB, objs []any, suffix string) {
	t.Helper()
	rb := cp.Clientset().RbacV1()
	ctx := context.Background()
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *rbacv1.Role:
			_, err = rb.Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = rb.RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			o.Name += suffix
			_, err = rb.ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			t.Cleanup(func() { _ = rb.ClusterRoles().Delete(context.Background(), o.Name, metav1.DeleteOptions{}) })
		case *rbacv1.ClusterRoleBinding:
			o.Name += suffix
			o.RoleRef.Name += suffix
			_, err = rb.ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			t.Cleanup(func() { _ = rb.ClusterRoleBindings().Delete(context.Background(), o.Name, metav1.DeleteOptions{}) })
		default:
			t.Fatalf("unexpected RBAC object %T", obj)
		}
		if err != nil {
			t.Fatalf("grant %T: %v", obj, err)
		}
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
