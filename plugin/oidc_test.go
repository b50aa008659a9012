package plugin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/plugin"
)

// headReader is the ClusterRole (and its binding) that grantHeadReads makes.
const headReader = "ql3-test-oidc-head-reader"

// The built binary authenticates as the kubeconfig's OIDC user, its token
// from the exec credential plugin (#26 point 4, docs/test-identities.md):
// the same `head` succeeds as the OIDC user its reads are granted to, whose
// reads the API server's audit log records as oidc:olive in oidc:approvers,
// and is refused as another OIDC user, granted nothing.
func TestBinaryAuthenticatesThroughOIDCExecPlugin(t *testing.T) {
	ns := cp.Namespace(t)
	grantHeadReads(t, testcluster.OIDCPrefix+"olive")
	out, stderr, code := run(t, nil, "--kubeconfig", cp.OIDCUser(t, "olive", "approvers"), "head", "-n", ns, "-o", "json")
	var rep plugin.HeadReport
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Namespace != ns || rep.Present {
		t.Fatalf("head as oidc:olive: exit %d, stdout %q, stderr %q; want exit 0 and no Head in %s", code, out, stderr, ns)
	}
	reads, err := cp.Reads(func(e testcluster.AuditEvent) bool { return e.User.Username == testcluster.OIDCPrefix+"olive" })
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range reads {
		got = append(got, fmt.Sprintf("%s %s/%s/%s %d %q", e.Verb, e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name, e.ResponseStatus.Code, e.User.Groups))
	}
	groups := fmt.Sprintf("%q", []string{"oidc:approvers", "system:authenticated"})
	want := []string{"get namespaces/kube-system/kube-system 200 " + groups, "get configmaps/" + ns + "/qinglong3-deployment-head 404 " + groups}
	if !slices.Equal(got, want) {
		t.Fatalf("reads by oidc:olive in the audit log:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	_, stderr, code = run(t, nil, "--kubeconfig", cp.OIDCUser(t, "oscar", "approvers"), "head", "-n", ns, "-o", "json")
	if refusal := `User "oidc:oscar" cannot get resource "namespaces"`; code != 2 || !strings.Contains(stderr, refusal) {
		t.Fatalf("head as oidc:oscar, granted nothing: exit %d, stderr %q; want exit 2 and %q", code, stderr, refusal)
	}
}

// grantHeadReads binds user to what head reads: the cluster identity
// (namespace kube-system) and the Head ConfigMap.
func grantHeadReads(t *testing.T, user string) {
	t.Helper()
	admin := cp.Clientset()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: headReader},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: []string{"kube-system"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}},
		},
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
	}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
		_ = admin.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
}
