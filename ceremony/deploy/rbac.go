package deploy

import (
	"cmp"
	"maps"
	"reflect"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// RBACPrefix starts the name of every Role, ClusterRole and binding `rbac`
// prints.
const RBACPrefix = "kubectl-ql3-deployer"

// RBACRoleName names the Roles (one in each namespace of the release) and
// the ClusterRole that `rbac` prints for the release whose Head is in
// controlNS: RBACPrefix + ":" + controlNS. A release is its control
// namespace (one Head there), so two releases' roles never share a name,
// and a newer print of the same release replaces its own. The bindings are
// named by cas.BindingName (role name and subject).
func RBACRoleName(controlNS string) string { return RBACPrefix + ":" + controlNS }

// RBACSubject optionally binds the roles to a user or group.
type RBACSubject = cas.Subject

// RBAC returns the least privilege for running the ceremony on a release:
// get, create and update of the Head ConfigMap in the control namespace
// only; get and patch (server-side apply and its dry-run) on exactly the
// inventory's objects, by name, and create on their kinds (server-side
// apply of a new object is a create, which RBAC cannot limit by name);
// escalate on the release's own Roles and bind on the roles its bindings
// reference (RBAC's escalation checks); get on the kube-system Namespace
// (the cluster identity). Nothing else.
func RBAC(objs []*unstructured.Unstructured, controlNS string, mapper meta.RESTMapper, subj RBACSubject) ([]any, error) {
	return RBACRetire(objs, nil, controlNS, mapper, subj)
}

// RBACRetire is RBAC for a retire of the objects retired (the objects of
// the deployed release that objs no longer has): RBAC's rules for objs,
// plus get and delete on exactly the retired objects, by name (the fenced
// delete, and the reads that settle it and wait until it is gone).
// Nothing else gains delete.
func RBACRetire(objs, retired []*unstructured.Unstructured, controlNS string, mapper meta.RESTMapper, subj RBACSubject) ([]any, error) {
	type key struct{ group, resource string }
	crds := map[schema.GroupKind]struct {
		plural     string
		namespaced bool
	}{}
	for _, u := range slices.Concat(objs, retired) {
		if u.GetKind() == "CustomResourceDefinition" && u.GroupVersionKind().Group == crdGroup {
			g, _, _ := unstructured.NestedString(u.Object, "spec", "group")
			k, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
			p, _, _ := unstructured.NestedString(u.Object, "spec", "names", "plural")
			s, _, _ := unstructured.NestedString(u.Object, "spec", "scope")
			crds[schema.GroupKind{Group: g, Kind: k}] = struct {
				plural     string
				namespaced bool
			}{p, s == "Namespaced"}
		}
	}
	namespaced := map[string]map[key][]string{} // namespace -> resource -> names
	cluster := map[key][]string{}
	extra := map[string]map[key][]string{} // namespace ("" = cluster) -> (group, resource:verb) -> names, for escalate, bind and delete
	addExtra := func(ns string, k key, name string) {
		if extra[ns] == nil {
			extra[ns] = map[key][]string{}
		}
		extra[ns][k] = append(extra[ns][k], name)
	}
	for i, u := range slices.Concat(objs, retired) {
		gvk := u.GroupVersionKind()
		var k key
		var isNS bool
		if c, ok := crds[gvk.GroupKind()]; ok {
			k, isNS = key{gvk.Group, c.plural}, c.namespaced
		} else {
			if mapper == nil {
				return nil, fail.Errorf(fail.Invalid, "rbac: kind %s needs a cluster to resolve its resource: pass --context", gvk)
			}
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				return nil, fail.Errorf(fail.Invalid, "rbac: %s: %v", gvk, err)
			}
			k, isNS = key{m.Resource.Group, m.Resource.Resource}, m.Scope.Name() == meta.RESTScopeNameNamespace
		}
		if i >= len(objs) { // retired
			ns := ""
			if isNS {
				ns = u.GetNamespace()
				if namespaced[ns] == nil {
					namespaced[ns] = map[key][]string{}
				}
			}
			addExtra(ns, key{k.group, k.resource + ":get,delete"}, u.GetName())
			continue
		}
		if isNS {
			if namespaced[u.GetNamespace()] == nil {
				namespaced[u.GetNamespace()] = map[key][]string{}
			}
			namespaced[u.GetNamespace()][k] = append(namespaced[u.GetNamespace()][k], u.GetName())
		} else {
			cluster[k] = append(cluster[k], u.GetName())
		}
	}
	// RBAC's own escalation checks: creating a Role needs escalate on it,
	// a binding needs bind on the role it references.
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		if gvk.Group != rbacv1.GroupName {
			continue
		}
		switch gvk.Kind {
		case "Role":
			addExtra(u.GetNamespace(), key{rbacv1.GroupName, "roles:escalate"}, u.GetName())
		case "ClusterRole":
			addExtra("", key{rbacv1.GroupName, "clusterroles:escalate"}, u.GetName())
		case "RoleBinding", "ClusterRoleBinding":
			kind, _, _ := unstructured.NestedString(u.Object, "roleRef", "kind")
			name, _, _ := unstructured.NestedString(u.Object, "roleRef", "name")
			res := "roles"
			if kind == "ClusterRole" {
				res = "clusterroles"
			}
			addExtra(u.GetNamespace(), key{rbacv1.GroupName, res + ":bind"}, name)
		}
	}
	rules := func(m map[key][]string, x map[key][]string) []rbacv1.PolicyRule {
		byKey := func(a, b key) int { return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.resource, b.resource)) }
		var out []rbacv1.PolicyRule
		for _, k := range slices.SortedFunc(maps.Keys(m), byKey) {
			names := slices.Compact(slices.Sorted(slices.Values(m[k])))
			out = append(out,
				rbacv1.PolicyRule{APIGroups: []string{k.group}, Resources: []string{k.resource}, Verbs: []string{"get", "patch"}, ResourceNames: names},
				// Server-side apply of an object that does not exist yet is a
				// create, which RBAC cannot limit by name.
				rbacv1.PolicyRule{APIGroups: []string{k.group}, Resources: []string{k.resource}, Verbs: []string{"create"}})
		}
		for _, k := range slices.SortedFunc(maps.Keys(x), byKey) {
			res, verb, _ := strings.Cut(k.resource, ":")
			names := slices.Compact(slices.Sorted(slices.Values(x[k])))
			out = append(out, rbacv1.PolicyRule{APIGroups: []string{k.group}, Resources: []string{res}, Verbs: strings.Split(verb, ","), ResourceNames: names})
		}
		return out
	}
	var out []any
	roleName := RBACRoleName(controlNS)
	if _, ok := namespaced[controlNS]; !ok {
		namespaced[controlNS] = map[key][]string{}
	}
	for _, ns := range slices.Sorted(maps.Keys(namespaced)) {
		r := rules(namespaced[ns], extra[ns])
		if ns == controlNS {
			head := []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "update"}, ResourceNames: []string{HeadName}},
			}
			// create cannot be limited by name (the name is in the body, not
			// the URL); the release's own ConfigMaps may have granted it already.
			createCM := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}}
			if !slices.ContainsFunc(r, func(p rbacv1.PolicyRule) bool { return reflect.DeepEqual(p, createCM) }) {
				head = append(head, createCM)
			}
			r = append(head, r...)
		}
		out = append(out, &rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: metav1.ObjectMeta{Name: roleName, Namespace: ns},
			Rules:      r,
		})
		if b := cas.Binding(subj, roleName, ns, nil); b != nil {
			out = append(out, b)
		}
	}
	out = append(out, &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: roleName},
		Rules: append([]rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}, ResourceNames: []string{metav1.NamespaceSystem}},
		}, rules(cluster, extra[""])...),
	})
	if b := cas.Binding(subj, roleName, "", nil); b != nil {
		out = append(out, b)
	}
	return out, nil
}
