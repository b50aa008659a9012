package envbundle

import (
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// RolePrefix starts the name of the publisher's Role of one bundle:
// RolePrefix + the bundle Secret's name. Its RoleBinding's name adds the
// subject's hash (access.BindingName).
const RolePrefix = "ql3-env-bundle-"

// AnnotationNote explains, on the printed Role, what RBAC cannot limit.
const AnnotationNote = access.NoteAnnotation

// CreateNote is why the Role's create rule names no Secret.
const CreateNote = "create on secrets cannot be limited by name (a create request has no name in its URL, so RBAC ignores resourceNames for it): this Role lets its holder create any Secret in the namespace; get and update are limited to the bundle Secret. Drop the create rule once the bundle Secret exists."

// Needs lists every permission publish of name in ns may use: get and
// update on that Secret, create on Secrets (the first publish). Inspect
// needs only the get.
func Needs(ns, name string) []access.Access {
	return []access.Access{
		{Verb: "get", Resource: "secrets", Namespace: ns, Name: name},
		{Verb: "update", Resource: "secrets", Namespace: ns, Name: name},
		{Verb: "create", Resource: "secrets", Namespace: ns},
	}
}

// Subject is whom RBAC binds the Role to (both empty: no binding).
type Subject = access.Subject

// RoleName is the name of the Role of bundle name; invalid when too long
// for its binding's name (access.MaxRoleName).
func RoleName(name string) (string, error) {
	r := RolePrefix + name
	if errs := validation.IsDNS1123Subdomain(r); len(errs) > 0 {
		return "", fail.Errorf(fail.Invalid, "--name %q: the Role name %q is not valid: %s", name, r, errs[0])
	}
	if err := access.CheckRoleName(fmt.Sprintf("--name %q", name), r); err != nil {
		return "", err
	}
	return r, nil
}

// RBAC is the least privilege of publishing bundle name in ns: a Role with
// get and update on that Secret by name and create on Secrets, and, for a
// subject, its RoleBinding. No list, watch, patch or delete.
func RBAC(ns, name string, sub Subject) ([]any, error) {
	rn, err := RoleName(name)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{LabelManagedBy: ManagedBy}
	role := access.Role(rn, ns, labels, CreateNote,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "update"}, ResourceNames: []string{name}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}})
	return access.Bind([]any{role}, sub, rn, ns, labels), nil
}
