package deploy_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

func rbacObject(kind, ns, name string, body map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: body}
	u.SetAPIVersion("rbac.authorization.k8s.io/v1")
	u.SetKind(kind)
	u.SetName(name)
	u.SetNamespace(ns)
	return u
}

// The print grants the rules of the release's own Role (in its namespace)
// and ClusterRole (cluster-wide), bind on exactly the roles its bindings
// reference, and `escalate` on nothing; a ClusterRole with an
// aggregationRule, which only a holder of every permission may write, is
// refused. (That the API server then refuses every widening is
// plugin TestDeployerCannotEscalate.)
func TestRBACHoldsReleaseRoleRules(t *testing.T) {
	roleRules := []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"get", "list"}}}
	crRules := []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"nodes"}, "verbs": []any{"get"}},
		map[string]any{"nonResourceURLs": []any{"/healthz"}, "verbs": []any{"get"}}}
	ref := func(kind, name string) map[string]any {
		return map[string]any{"roleRef": map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}}
	}
	objs := []*unstructured.Unstructured{
		rbacObject("Role", "app", "app-role", map[string]any{"rules": roleRules}),
		rbacObject("ClusterRole", "", "app-reader", map[string]any{"rules": crRules}),
		rbacObject("RoleBinding", "app", "app-role", ref("Role", "app-role")),
		rbacObject("RoleBinding", "app", "app-view", ref("ClusterRole", "view")),
		rbacObject("ClusterRoleBinding", "", "app-reader", ref("ClusterRole", "app-reader")),
	}
	out, err := deploy.RBAC(objs, "app", cluster(t, cp.RESTConfig()).Mapper(), deploy.RBACSubject{})
	if err != nil {
		t.Fatal(err)
	}
	var role *rbacv1.Role
	var cr *rbacv1.ClusterRole
	for _, o := range out {
		switch o := o.(type) {
		case *rbacv1.Role:
			role = o
		case *rbacv1.ClusterRole:
			cr = o
		}
	}
	has := func(rules []rbacv1.PolicyRule, want rbacv1.PolicyRule) bool {
		return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool { return reflect.DeepEqual(r, want) })
	}
	for _, r := range slices.Concat(role.Rules, cr.Rules) {
		if slices.Contains(r.Verbs, "escalate") || slices.Contains(r.Verbs, "*") {
			t.Errorf("the print grants %v", r)
		}
	}
	wants := []struct {
		rules []rbacv1.PolicyRule
		want  rbacv1.PolicyRule
	}{
		{role.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}},
		{role.Rules, rbacv1.PolicyRule{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, Verbs: []string{"bind"}, ResourceNames: []string{"view"}}},
		{role.Rules, rbacv1.PolicyRule{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles"}, Verbs: []string{"bind"}, ResourceNames: []string{"app-role"}}},
		{cr.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}}},
		{cr.Rules, rbacv1.PolicyRule{NonResourceURLs: []string{"/healthz"}, Verbs: []string{"get"}}},
		{cr.Rules, rbacv1.PolicyRule{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, Verbs: []string{"bind"}, ResourceNames: []string{"app-reader"}}},
	}
	for _, w := range wants {
		if !has(w.rules, w.want) {
			t.Errorf("the print lacks %+v in %+v", w.want, w.rules)
		}
	}
	if has(cr.Rules, wants[0].want) || has(role.Rules, wants[3].want) {
		t.Errorf("a role's rules were granted outside its scope: Role %+v ClusterRole %+v", role.Rules, cr.Rules)
	}

	agg := rbacObject("ClusterRole", "", "app-agg", map[string]any{"aggregationRule": map[string]any{
		"clusterRoleSelectors": []any{map[string]any{"matchLabels": map[string]any{"app": "x"}}}}})
	_, err = deploy.RBAC([]*unstructured.Unstructured{agg}, "app", cluster(t, cp.RESTConfig()).Mapper(), deploy.RBACSubject{})
	if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "ClusterRole app-agg has an aggregationRule") {
		t.Fatalf("an aggregated ClusterRole: %v, want invalid naming it", err)
	}
}
