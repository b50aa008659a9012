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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
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
// named by access.BindingName (role name and subject).
func RBACRoleName(controlNS string) string { return RBACPrefix + ":" + controlNS }

// RBACSubject optionally binds the roles to a user or group.
type RBACSubject = access.Subject

// RBAC returns the least privilege for running the ceremony on a release:
// get, create and update of the Head ConfigMap in the control namespace
// only; get and patch (server-side apply and its dry-run) on exactly the
// inventory's objects, by name, and create on their kinds (server-side
// apply of a new object is a create, which RBAC cannot limit by name);
// the rules of the release's own Roles (in their namespace) and
// ClusterRoles (cluster-wide), and bind on exactly the roles its bindings
// reference, by name (RBAC's escalation checks, never `escalate`:
// addEscalation); watch on exactly the release's Deployments,
// StatefulSets and DaemonSets, by name (converge's wake-up); list on pods, and on replicasets where there are
// Deployments, in each namespace of the release's Deployments,
// StatefulSets and DaemonSets (converge explains a rollout
// that does not progress by its pods: rollout.go); get on the kube-system
// Namespace (the cluster identity). Nothing else.
func RBAC(objs []*unstructured.Unstructured, controlNS string, mapper meta.RESTMapper, subj RBACSubject) ([]any, error) {
	return RBACRetire(objs, nil, controlNS, mapper, subj)
}

// RBACRetire is RBAC for a retire of the objects retired (the objects of
// the deployed release that objs no longer has): RBAC's rules for objs,
// plus get and delete on exactly the retired objects, by name (the fenced
// delete, and the reads that settle it and wait until it is gone).
// Nothing else gains delete.
func RBACRetire(objs, retired []*unstructured.Unstructured, controlNS string, mapper meta.RESTMapper, subj RBACSubject) ([]any, error) {
	g, err := rbacGrantsOf(objs, retired, mapper)
	if err != nil {
		return nil, err
	}
	var out []any
	roleName := RBACRoleName(controlNS)
	if _, ok := g.namespaced[controlNS]; !ok {
		g.namespaced[controlNS] = map[rbacKey][]string{}
	}
	for _, ns := range slices.Sorted(maps.Keys(g.namespaced)) {
		r := appendNew(append(rbacRules(g.namespaced[ns], g.extra[ns]), rolloutReadRules(g.rollouts[ns])...), g.held[ns]...)
		if ns == controlNS {
			r = append(headRules(r), r...)
		}
		out = append(out, &rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: metav1.ObjectMeta{Name: roleName, Namespace: ns},
			Rules:      r,
		})
		if b := access.Binding(subj, roleName, ns, nil); b != nil {
			out = append(out, b)
		}
	}
	out = append(out, &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: roleName},
		Rules: append([]rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}, ResourceNames: []string{metav1.NamespaceSystem}},
		}, appendNew(rbacRules(g.cluster, g.extra[""]), g.held[""]...)...),
	})
	if b := access.Binding(subj, roleName, "", nil); b != nil {
		out = append(out, b)
	}
	return out, nil
}

// rbacKey is a resource of an API group; in rbacGrants.extra the resource
// carries its verbs: "roles:bind", "pods:get,delete".
type rbacKey struct{ group, resource string }

// rbacGrants are the names each rule grants on.
type rbacGrants struct {
	namespaced map[string]map[rbacKey][]string // namespace -> resource -> names (get, patch; create)
	cluster    map[rbacKey][]string            // cluster-scoped resource -> names
	extra      map[string]map[rbacKey][]string // namespace ("" = cluster) -> (group, resource:verbs) -> names, for bind and delete
	held       map[string][]rbacv1.PolicyRule  // namespace ("" = cluster) -> the rules of the release's roles there (releaseRoleRules)
	rollouts   map[string]map[string]bool      // namespace -> kinds of its workloads whose pods converge explains
}

// rbacGrantsOf gathers the grants for applying objs and deleting retired,
// and those RBAC's own escalation checks ask for.
func rbacGrantsOf(objs, retired []*unstructured.Unstructured, mapper meta.RESTMapper) (*rbacGrants, error) {
	g := &rbacGrants{namespaced: map[string]map[rbacKey][]string{}, cluster: map[rbacKey][]string{}, extra: map[string]map[rbacKey][]string{},
		held: map[string][]rbacv1.PolicyRule{}, rollouts: rolloutKinds(objs)}
	crds := releaseCRDs(slices.Concat(objs, retired))
	for i, u := range slices.Concat(objs, retired) {
		k, isNS, err := rbacResource(u, crds, mapper)
		if err != nil {
			return nil, err
		}
		ns := ""
		if isNS {
			ns = u.GetNamespace()
			if g.namespaced[ns] == nil {
				g.namespaced[ns] = map[rbacKey][]string{}
			}
		}
		switch {
		case i >= len(objs): // retired
			g.addExtra(ns, rbacKey{k.group, k.resource + ":get,delete"}, u.GetName())
		case isNS:
			g.namespaced[ns][k] = append(g.namespaced[ns][k], u.GetName())
			if isWorkload(u) { // converge watches it to see its rollout end at once
				g.addExtra(ns, rbacKey{k.group, k.resource + ":watch"}, u.GetName())
			}
		default:
			g.cluster[k] = append(g.cluster[k], u.GetName())
		}
	}
	if err := g.addEscalation(objs); err != nil {
		return nil, err
	}
	return g, nil
}

// rbacResource resolves u's resource and scope: from the release's own
// CRDs, else from the mapper (a cluster is needed for it).
func rbacResource(u *unstructured.Unstructured, crds map[schema.GroupKind]crdInfo, mapper meta.RESTMapper) (rbacKey, bool, error) {
	gvk := u.GroupVersionKind()
	if c, ok := crds[gvk.GroupKind()]; ok {
		return rbacKey{gvk.Group, c.plural}, c.namespaced, nil
	}
	if mapper == nil {
		return rbacKey{}, false, fail.Errorf(fail.Invalid, "rbac: kind %s needs a cluster to resolve its resource: pass --context", gvk)
	}
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return rbacKey{}, false, fail.Errorf(fail.Invalid, "rbac: %s: %v", gvk, err)
	}
	return rbacKey{m.Resource.Group, m.Resource.Resource}, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

func (g *rbacGrants) addExtra(ns string, k rbacKey, name string) {
	if g.extra[ns] == nil {
		g.extra[ns] = map[rbacKey][]string{}
	}
	g.extra[ns][k] = append(g.extra[ns][k], name)
}

// addEscalation adds what RBAC's own escalation checks ask, without
// `escalate`: creating or updating a Role or ClusterRole is allowed only
// to whoever holds every permission its rules grant (in its namespace; a
// ClusterRole's cluster-wide), so the deployer is given exactly those
// rules (held); a binding needs `bind` on the role it references (or all
// of that role's permissions, which a role outside the release is not
// given), so bind is granted on exactly those roles, by name. `escalate`
// is never granted: with it, `patch` on a release Role would let the
// deployer write any rules into it and bind it to itself.
func (g *rbacGrants) addEscalation(objs []*unstructured.Unstructured) error {
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		if gvk.Group != rbacv1.GroupName {
			continue
		}
		switch gvk.Kind {
		case "Role", "ClusterRole":
			rules, err := releaseRoleRules(u)
			if err != nil {
				return err
			}
			ns := u.GetNamespace()
			if gvk.Kind == "ClusterRole" {
				ns = ""
			}
			g.held[ns] = appendNew(g.held[ns], rules...)
		case "RoleBinding", "ClusterRoleBinding":
			kind, _, _ := unstructured.NestedString(u.Object, "roleRef", "kind")
			name, _, _ := unstructured.NestedString(u.Object, "roleRef", "name")
			res := "roles"
			if kind == "ClusterRole" {
				res = "clusterroles"
			}
			g.addExtra(u.GetNamespace(), rbacKey{rbacv1.GroupName, res + ":bind"}, name)
		}
	}
	return nil
}

// appendNew appends to rules each of add that it does not hold yet.
func appendNew(rules []rbacv1.PolicyRule, add ...rbacv1.PolicyRule) []rbacv1.PolicyRule {
	for _, r := range add {
		if !slices.ContainsFunc(rules, func(h rbacv1.PolicyRule) bool { return reflect.DeepEqual(h, r) }) {
			rules = append(rules, r)
		}
	}
	return rules
}

// releaseRoleRules are the rules of the release's Role or ClusterRole u,
// which the deployer must hold to write it. A ClusterRole with an
// aggregationRule is refused: the API server lets only a holder of every
// permission (or of `escalate`) set one, and this print grants neither.
func releaseRoleRules(u *unstructured.Unstructured) ([]rbacv1.PolicyRule, error) {
	var role struct {
		Rules           []rbacv1.PolicyRule     `json:"rules"`
		AggregationRule *rbacv1.AggregationRule `json:"aggregationRule"`
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err != nil {
		return nil, fail.Errorf(fail.Invalid, "rbac: %s %s: its rules: %v", u.GetKind(), u.GetName(), err)
	}
	if role.AggregationRule != nil {
		return nil, fail.Errorf(fail.Invalid, "rbac: ClusterRole %s has an aggregationRule: the API server lets only someone who holds every permission (or `escalate`) write one, and the printed deployer role grants neither; apply it as a cluster admin outside the release, or list its rules instead", u.GetName())
	}
	return role.Rules, nil
}

// rbacRules turns grants into rules, sorted by group and resource: get and
// patch by name and create for each resource of m, then x's verbs by name.
func rbacRules(m, x map[rbacKey][]string) []rbacv1.PolicyRule {
	byKey := func(a, b rbacKey) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.resource, b.resource))
	}
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

// headRules are the control namespace's rules on the Head, put before its
// rules r: get and update by name, and create unless r grants it already.
func headRules(r []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	head := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "update"}, ResourceNames: []string{HeadName}},
	}
	// create cannot be limited by name (the name is in the body, not the
	// URL); the release's own ConfigMaps may have granted it already.
	createCM := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}}
	if !slices.ContainsFunc(r, func(p rbacv1.PolicyRule) bool { return reflect.DeepEqual(p, createCM) }) {
		head = append(head, createCM)
	}
	return head
}

// rolloutKinds are, by namespace, the kinds of objs whose pods converge
// explains (rollout.go).
func rolloutKinds(objs []*unstructured.Unstructured) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, u := range objs {
		if !isWorkload(u) {
			continue
		}
		if out[u.GetNamespace()] == nil {
			out[u.GetNamespace()] = map[string]bool{}
		}
		out[u.GetNamespace()][u.GetKind()] = true
	}
	return out
}

// isWorkload says whether u is an apps/v1 Deployment, StatefulSet or
// DaemonSet: converge explains its rollout by its pods, and may watch it.
func isWorkload(u *unstructured.Unstructured) bool {
	return u.GetAPIVersion() == "apps/v1" && podKinds[u.GetKind()]
}

// rolloutReadNeeds are the LISTs that explain the rollouts of kinds in
// namespace ns: pods, and replicasets when there is a Deployment.
// RBAC cannot limit a list by name.
func rolloutReadNeeds(ns string, kinds map[string]bool) []access.Access {
	if len(kinds) == 0 {
		return nil
	}
	needs := []access.Access{{Verb: "list", Resource: "pods", Namespace: ns}}
	if kinds["Deployment"] {
		needs = append(needs, access.Access{Verb: "list", Group: "apps", Resource: "replicasets", Namespace: ns})
	}
	return needs
}

// rolloutReadRules are rolloutReadNeeds as rules.
func rolloutReadRules(kinds map[string]bool) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, a := range rolloutReadNeeds("", kinds) {
		out = append(out, rbacv1.PolicyRule{APIGroups: []string{a.Group}, Resources: []string{a.Resource}, Verbs: []string{a.Verb}})
	}
	return out
}
