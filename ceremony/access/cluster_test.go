package access_test

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
)

// The permission review is proven here against a real kube-apiserver.
var cp *testcluster.ControlPlane

func TestMain(m *testing.M) { testcluster.Main(m, testcluster.Options{}, &cp) }

// The permission review asks the real authorizer: a user holding only
// get on one ConfigMap is refused (invalid, listing what is missing) before
// any write; the grant makes the same check pass.
func TestRequire(t *testing.T) {
	ns := cp.Namespace(t)
	cfg := cp.User(t, "reviewed")
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	needs := []access.Access{
		{Verb: "get", Resource: "configmaps", Namespace: ns, Name: "ptr"},
		{Verb: "update", Resource: "configmaps", Namespace: ns, Name: "ptr"},
		{Verb: "create", Resource: "configmaps", Namespace: ns},
	}
	admin := cp.Clientset()
	ctx := context.Background()
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "r"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"ptr"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "r"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "r"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "reviewed", APIGroup: "rbac.authorization.k8s.io"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = access.Require(ctx, access.NewReview(access.NewReviewer(cs)), needs, "grant it")
	if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "update configmaps/ptr") || !strings.Contains(err.Error(), "create configmaps") || strings.Contains(err.Error(), "get configmaps") {
		t.Fatalf("review: %v, want invalid listing update and create only", err)
	}
	role, _ := admin.RbacV1().Roles(ns).Get(ctx, "r", metav1.GetOptions{})
	role.Rules = append(role.Rules,
		rbacv1.PolicyRule{Verbs: []string{"update"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"ptr"}},
		rbacv1.PolicyRule{Verbs: []string{"create"}, APIGroups: []string{""}, Resources: []string{"configmaps"}})
	if _, err := admin.RbacV1().Roles(ns).Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := access.Require(ctx, access.NewReview(access.NewReviewer(cs)), needs, "grant it"); err != nil {
		t.Fatalf("review after the grant: %v", err)
	}
}
