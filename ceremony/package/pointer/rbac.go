package pointer

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/package/intent"
)

// RolePrefix starts the Role's name: RolePrefix + the pointer's name. The
// bindings' names add the subject's hash (access.BindingName).
const RolePrefix = "ql3-package-"

// ClusterRoleName is the ClusterRole that reads the cluster identity: the
// same for every pointer, so one name.
const ClusterRoleName = "ql3-package-cluster-identity"

// AnnotationNote explains, on the printed Role, what RBAC cannot limit.
const AnnotationNote = access.NoteAnnotation

// CreateNote is why the Role's create rule names no ConfigMap.
const CreateNote = "create on configmaps cannot be limited by name (a create request has no name in its URL, so RBAC ignores resourceNames for it): this Role lets its holder create any ConfigMap in the namespace; get and update are limited to the package's active pointer. Drop the create rule once generation 1 is active."

// IdentityNote is why the ClusterRole exists (a deviation from ADR-0139's
// ConfigMap-only role).
const IdentityNote = "get on the kube-system Namespace only: its UID is the cluster identity every intent names (ADR-0139 grants ConfigMap verbs only; kubectl-ql3 reads the identity itself, docs/package-pointer.md)"

// Needs lists every permission activate of the pointer nm in ns may use;
// inspect and intent need the two gets.
func Needs(nm intent.Naming, ns string) []access.Access {
	return []access.Access{identityAccess, configMapAccess("get", ns, nm.Name), configMapAccess("update", ns, nm.Name), configMapAccess("create", ns, "")}
}

// Subject is whom RBAC binds the roles to (both empty: no binding).
type Subject = access.Subject

// RBAC is the least privilege of activating the pointer nm in ns: a Role
// with get and update on that ConfigMap by name and create on ConfigMaps,
// a ClusterRole with get on the kube-system Namespace, and, for a
// subject, their bindings. No list, watch, patch or delete.
func RBAC(nm intent.Naming, ns string, sub Subject) []any {
	labels := map[string]string{LabelManagedBy: ManagedBy}
	rn := RolePrefix + nm.Name
	role := access.Role(rn, ns, labels, CreateNote,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "update"}, ResourceNames: []string{nm.Name}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}})
	cr := access.ClusterRole(ClusterRoleName, labels, IdentityNote,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}, ResourceNames: []string{metav1.NamespaceSystem}})
	out := access.Bind([]any{role}, sub, rn, ns, labels)
	return access.Bind(append(out, cr), sub, ClusterRoleName, "", labels)
}
