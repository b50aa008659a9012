package keyset

import (
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
)

// RoleName names the publisher's Role (one per namespace: it grants the
// same to every publisher there); its RoleBinding's name adds the
// subject's hash (access.BindingName).
const RoleName = "ql3-keyset-publisher"

// AnnotationNote explains, on the printed Role, what RBAC cannot limit.
const AnnotationNote = access.NoteAnnotation

// CreateNote is why the Role's create rule names no Secret.
const CreateNote = "create on secrets cannot be limited by name (a create request has no name in its URL, so RBAC ignores resourceNames for it): this Role lets its holder create any Secret in the namespace; get and update are limited to the ledger and keyset Secrets. Drop the create rule once both Secrets exist."

// Needs lists every permission a publish in ns may use: get and update on
// the two Secrets by name, and create on Secrets (for the first publish).
// Publish reviews the gets before reading and only the writes it will make
// before writing.
func Needs(ns string) []access.Access {
	var out []access.Access
	for _, verb := range []string{"get", "update"} {
		for _, name := range []string{LedgerSecret, KeysetSecret} {
			out = append(out, access.Access{Verb: verb, Resource: "secrets", Namespace: ns, Name: name})
		}
	}
	return append(out, access.Access{Verb: "create", Resource: "secrets", Namespace: ns})
}

// Subject is whom RBAC binds the Role to (both empty: no binding).
type Subject = access.Subject

// RBAC is the least privilege of `keyset publish` in ns: a Role with get
// and update on the ledger and keyset Secrets by name and create on
// Secrets, and, for a subject, its RoleBinding.
func RBAC(ns string, sub Subject) []any {
	labels := map[string]string{LabelManagedBy: ManagedBy}
	role := access.Role(RoleName, ns, labels, CreateNote,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "update"}, ResourceNames: []string{LedgerSecret, KeysetSecret}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}})
	return access.Bind([]any{role}, sub, RoleName, ns, labels)
}
