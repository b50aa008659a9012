package testcluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// GrantAll creates, as the admin, the roles and bindings an rbac command
// printed (*rbacv1.Role, RoleBinding, ClusterRole, ClusterRoleBinding),
// and returns revoke, which deletes them again; the cluster-scoped ones
// are deleted when the test ends in any case. A ClusterRole of the name
// already there (printed ClusterRoles can be shared by name, as the
// package pointer's) must hold the same rules, and is left.
func (cp *ControlPlane) GrantAll(t testing.TB, objs []any) (revoke func()) {
	t.Helper()
	ctx, opts := context.Background(), metav1.DeleteOptions{}
	rb := cp.Clientset().RbacV1()
	var undo []func() error
	for _, obj := range objs {
		var err error
		var del func() error
		switch o := obj.(type) {
		case *rbacv1.Role:
			_, err = rb.Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			del = func() error { return rb.Roles(o.Namespace).Delete(ctx, o.Name, opts) }
		case *rbacv1.RoleBinding:
			_, err = rb.RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			del = func() error { return rb.RoleBindings(o.Namespace).Delete(ctx, o.Name, opts) }
		case *rbacv1.ClusterRole:
			del, err = cp.createClusterRole(o)
		case *rbacv1.ClusterRoleBinding:
			_, err = rb.ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			del = func() error { return rb.ClusterRoleBindings().Delete(ctx, o.Name, opts) }
		default:
			t.Fatalf("unexpected RBAC object %T", obj)
		}
		if err != nil {
			t.Fatalf("grant %T: %v", obj, err)
		}
		if del == nil {
			continue
		}
		if obj.(metav1.Object).GetNamespace() == "" { // cluster-scoped: outlives the test's namespace
			t.Cleanup(func() { _ = del() })
		}
		undo = append(undo, del)
	}
	return func() {
		t.Helper()
		for _, del := range undo {
			if err := del(); err != nil {
				t.Fatalf("revoke: %v", err)
			}
		}
	}
}

// createClusterRole is GrantAll's create of o: del deletes it, nil when
// an equal one was there already.
func (cp *ControlPlane) createClusterRole(o *rbacv1.ClusterRole) (del func() error, err error) {
	ctx := context.Background()
	c := cp.Clientset().RbacV1().ClusterRoles()
	_, err = c.Create(ctx, o, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return func() error { return c.Delete(ctx, o.Name, metav1.DeleteOptions{}) }, err
	}
	have, err := c.Get(ctx, o.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if !equality.Semantic.DeepEqual(have.Rules, o.Rules) {
		return nil, fmt.Errorf("ClusterRole %s exists with rules %+v, not the printed %+v", o.Name, have.Rules, o.Rules)
	}
	return nil, nil
}

// WaitGranted waits until the RBAC authorizer allows user every rule of
// the roles in objs (as GrantAll created them): its informers see each
// role and binding on their own, some time after it was created, so one
// rule allowed says nothing of the others.
func (cp *ControlPlane) WaitGranted(t testing.TB, user string, objs []any) {
	t.Helper()
	var pending []authorizationv1.ResourceAttributes
	for _, obj := range objs {
		var ns string
		var rules []rbacv1.PolicyRule
		switch o := obj.(type) {
		case *rbacv1.Role:
			ns, rules = o.Namespace, o.Rules
		case *rbacv1.ClusterRole:
			rules = o.Rules
		}
		for _, r := range rules {
			pending = append(pending, ruleAttributes(ns, r)...)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	sars := cp.Clientset().AuthorizationV1().SubjectAccessReviews()
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for len(pending) > 0 {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &pending[0]}}
			got, err := sars.Create(ctx, sar, metav1.CreateOptions{})
			if err != nil || !got.Status.Allowed {
				return false, nil
			}
			pending = pending[1:] // a grant, once seen, stays
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the grant of %s never took effect (%v): still denied %+v", user, err, pending[0])
	}
}

// ruleAttributes is every request rule r of a role in namespace ns ("": a
// ClusterRole) allows: each verb on each resource, by each name.
func ruleAttributes(ns string, r rbacv1.PolicyRule) []authorizationv1.ResourceAttributes {
	names := r.ResourceNames
	if len(names) == 0 {
		names = []string{""}
	}
	var out []authorizationv1.ResourceAttributes
	for _, g := range r.APIGroups {
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				for _, n := range names {
					out = append(out, authorizationv1.ResourceAttributes{Namespace: ns, Verb: v, Group: g, Resource: res, Name: n})
				}
			}
		}
	}
	return out
}

// GrantPrinted is GrantAll for objects whose cluster-scoped names must not
// be shared with tests in other namespaces: each ClusterRole and
// ClusterRoleBinding gets suffix added to its name (and a binding to its
// roleRef) first.
func (cp *ControlPlane) GrantPrinted(t testing.TB, objs []any, suffix string) {
	t.Helper()
	for _, obj := range objs {
		switch o := obj.(type) {
		case *rbacv1.ClusterRole:
			o.Name += suffix
		case *rbacv1.ClusterRoleBinding:
			o.Name += suffix
			o.RoleRef.Name += suffix
		}
	}
	cp.GrantAll(t, objs)
}
