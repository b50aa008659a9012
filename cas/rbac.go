package cas

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Subject is who a printed least-privilege Role is bound to (`--bind-user`,
// `--bind-group`); empty binds nobody.
type Subject struct {
	User  string
	Group string
}

// Binding binds subj to the Role (ns set) or ClusterRole (ns empty)
// roleName; nil when subj names nobody. Every operation's `rbac` command
// prints its Role and this binding.
func Binding(subj Subject, roleName, ns string, labels map[string]string) any {
	var subjects []rbacv1.Subject
	if subj.User != "" {
		subjects = append(subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: subj.User})
	}
	if subj.Group != "" {
		subjects = append(subjects, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: subj.Group})
	}
	if len(subjects) == 0 {
		return nil
	}
	if ns == "" {
		return &rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: roleName, Labels: labels},
			Subjects:   subjects, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName},
		}
	}
	return &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: roleName, Namespace: ns, Labels: labels},
		Subjects:   subjects, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: roleName},
	}
}
