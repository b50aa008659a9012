package access

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// Subject is who a printed least-privilege Role is bound to (`--bind-user`,
// `--bind-group`); empty binds nobody.
type Subject struct {
	User  string
	Group string
}

// SubjectHashLen is how many hex digits of the subjects' SHA-256 end the
// name of a printed binding.
const SubjectHashLen = 16

// MaxRoleName is the longest Role or ClusterRole name an `rbac` command
// prints: its bindings' names add "-" and SubjectHashLen hex digits and
// stay within the 253 characters of an object name.
const MaxRoleName = 253 - 1 - SubjectHashLen

// Subjects is the binding's subjects for subj, in the order printed: the
// user, then the group; nil when subj names nobody.
func Subjects(subj Subject) []rbacv1.Subject {
	var out []rbacv1.Subject
	if subj.User != "" {
		out = append(out, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: subj.User})
	}
	if subj.Group != "" {
		out = append(out, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: subj.Group})
	}
	return out
}

// BindingName is the name of the binding of subjects to the role roleName:
// roleName, "-", and the first SubjectHashLen hex digits of the SHA-256 of
// the subjects as compact JSON, exactly as the binding prints them
// (`[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"u1"}]`).
// A role's name says what it grants (its scope), so the binding's says
// what, and to whom: printed RBAC for another subject or scope never
// replaces this binding, and the same print applied twice is the same
// object.
func BindingName(roleName string, subjects []rbacv1.Subject) string {
	b, err := json.Marshal(subjects)
	if err != nil {
		panic(err) // strings only: cannot fail
	}
	sum := sha256.Sum256(b)
	return roleName + "-" + hex.EncodeToString(sum[:])[:SubjectHashLen]
}

// CheckRoleName refuses (invalid input, naming flag) a role name that is
// not a valid RBAC name or leaves no room for its bindings' suffix.
func CheckRoleName(flag, name string) error {
	if errs := content.IsPathSegmentName(name); len(errs) > 0 {
		return fail.Errorf(fail.Invalid, "%s: the Role name %q is not valid: %s", flag, name, errs[0])
	}
	if len(name) > MaxRoleName {
		return fail.Errorf(fail.Invalid, "%s: the Role name %q is %d characters, longer than %d (a binding's name adds %d to it, within the API's 253)", flag, name, len(name), MaxRoleName, 1+SubjectHashLen)
	}
	return nil
}

// Binding binds subj to the Role (ns set) or ClusterRole (ns empty)
// roleName, named by BindingName; nil when subj names nobody. Every
// operation's `rbac` command prints its Role and this binding.
func Binding(subj Subject, roleName, ns string, labels map[string]string) any {
	subjects := Subjects(subj)
	if len(subjects) == 0 {
		return nil
	}
	name := BindingName(roleName, subjects)
	if ns == "" {
		return &rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Subjects:   subjects, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName},
		}
	}
	return &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Subjects:   subjects, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: roleName},
	}
}

// NoteAnnotation explains, on a printed Role, what RBAC cannot limit (a
// create that no resourceNames can restrict, a list over a namespace).
const NoteAnnotation = "qinglong.io/note"

// Role is a printed Role name in ns with labels and rules, annotated with
// note (NoteAnnotation) when note is set.
func Role(name, ns string, labels map[string]string, note string, rules ...rbacv1.PolicyRule) *rbacv1.Role {
	return &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: objectMeta(name, ns, labels, note),
		Rules:      rules,
	}
}

// ClusterRole is a printed ClusterRole, as Role.
func ClusterRole(name string, labels map[string]string, note string, rules ...rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: objectMeta(name, "", labels, note),
		Rules:      rules,
	}
}

func objectMeta(name, ns string, labels map[string]string, note string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}
	if note != "" {
		m.Annotations = map[string]string{NoteAnnotation: note}
	}
	return m
}

// Bind is out followed by the binding of subj to the Role (ns set) or
// ClusterRole (ns empty) roleName (Binding); out as it is when subj names
// nobody.
func Bind(out []any, subj Subject, roleName, ns string, labels map[string]string) []any {
	if b := Binding(subj, roleName, ns, labels); b != nil {
		return append(out, b)
	}
	return out
}
