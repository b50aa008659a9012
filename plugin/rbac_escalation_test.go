package plugin_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/qinglong/kubectl-ql3/internal/testcluster"
)

// clusterRBAC is a ClusterRole and its ClusterRoleBinding added to a
// release (CLUSTERROLE and NS replaced): the release's cluster-wide grant.
const clusterRBAC = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: CLUSTERROLE
rules:
- apiGroups: [""]
  resources: [nodes]
  verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: CLUSTERROLE
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: CLUSTERROLE
subjects:
- kind: ServiceAccount
  name: ql3-control
  namespace: NS
`

// The deployer of docs/guide-ci-and-jobs.md's Job — a ServiceAccount bound to exactly
// what `kubectl ql3 rbac DIR` prints — installs and upgrades a release
// whose Role and ClusterRole change between the versions, through the
// ceremony, and cannot make itself more than that print: widening the
// release's Role or ClusterRole to */*/*, writing a new Role that grants
// it, or binding a role outside the release (ClusterRole cluster-admin, in
// the namespace or cluster-wide) to itself is refused (403, in the audit
// log). Not ClusterRole admin: the test cluster runs no aggregation
// controller, so admin has no rules and binding it grants nothing. What
// RBAC cannot take away is pinned: the deployer may bind the release's own
// Role to itself (bind cannot be limited by subject), which grants it
// nothing it does not hold already.
func TestDeployerCannotEscalate(t *testing.T) {
	ns, ci := controlNamespace(t), cp.Namespace(t)
	reader := "ql3-reader-" + ns
	t.Cleanup(func() {
		rb := cp.Clientset().RbacV1()
		for _, name := range []string{reader, "ql3-attacker-" + ns} {
			_ = rb.ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
			_ = rb.ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	withCluster := func(dir, version string, edit func(string) string) string {
		data := strings.NewReplacer("CLUSTERROLE", reader, "NS", ns).Replace(clusterRBAC)
		if err := os.WriteFile(filepath.Join(dir, "cluster-rbac.yaml"), []byte(edit(data)), 0o644); err != nil {
			t.Fatal(err)
		}
		relock(t, dir, version, func(k string) string {
			return strings.Replace(k, "- rbac.yaml\n", "- rbac.yaml\n- cluster-rbac.yaml\n", 1)
		})
		return dir
	}
	same := func(s string) string { return s }
	v300 := withCluster(releaseCopy(t, "v3.0.0", ns, ""), "3.0.0", same)
	v310 := releaseCopy(t, "v3.1.0", ns, "")
	editFile(t, filepath.Join(v310, "rbac.yaml"), func(s string) string {
		return strings.Replace(s, "  verbs: [get, list, watch, update, patch]\n", "  verbs: [get, list, watch, update, patch]\n- apiGroups: [apps]\n  resources: [deployments]\n  verbs: [get, list]\n", 1)
	})
	v310 = withCluster(v310, "3.1.0", func(s string) string { return strings.Replace(s, "verbs: [get, list]", "verbs: [get, list, watch]", 1) })

	kc, sa := cp.ServiceAccountKubeconfig(t, ci, "ql3-deployer")
	env := []string{"KUBECONFIG=" + kc}
	work := t.TempDir()
	rdir := filepath.Join(work, "receipts")
	grantPrint(t, v300, sa)
	pf := filepath.Join(work, "install.json")
	mustRun(t, env, "preflight", v300, "--transition", "install", "--expected-head", headToken(t, env, ns), "--out", pf)
	mustRun(t, env, "apply", "--preflight", pf, "--receipts-dir", rdir)

	if attemptEscalation(t, kc, sa, ns, reader); t.Failed() {
		return // an escalation that got through changed what the upgrade would meet
	}

	grantPrint(t, v310, sa) // the newest print of a release is its grant
	pf = filepath.Join(work, "upgrade.json")
	mustRun(t, env, "preflight", v310, "--transition", "upgrade", "--expected-head", headToken(t, env, ns), "--out", pf)
	if out := mustRun(t, env, "apply", "--preflight", pf, "--receipts-dir", rdir); !strings.Contains(out, "committed: generation 2, upgrade 3.1.0") {
		t.Fatalf("upgrade as %s:\n%s", sa, out)
	}
	role, err := cp.Clientset().RbacV1().Roles(ns).Get(context.Background(), "ql3-control", metav1.GetOptions{})
	if err != nil || len(role.Rules) != 3 {
		t.Fatalf("the upgrade did not write the release's Role: %+v %v", role, err)
	}
	mustRun(t, nil, "receipt", "audit", rdir, "--release", v310)
}

// grantPrint applies, as the admin, what `kubectl ql3 rbac DIR --bind-user
// USER` prints and waits until the authorizer allows user every rule of it.
func grantPrint(t *testing.T, dir, user string) {
	t.Helper()
	out := mustRun(t, nil, "rbac", dir, "--bind-user", user, "-o", "json")
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("rbac -o json: %v\n%s", err, out)
	}
	var roles []any
	for _, it := range list.Items {
		var head metav1.TypeMeta
		_ = json.Unmarshal(it, &head)
		var obj metav1.Object
		switch head.Kind {
		case "Role":
			obj = &rbacv1.Role{}
		case "ClusterRole":
			obj = &rbacv1.ClusterRole{}
		case "ClusterRoleBinding":
			obj = &rbacv1.ClusterRoleBinding{}
		default:
			continue
		}
		if err := json.Unmarshal(it, obj); err != nil {
			t.Fatal(err)
		}
		if head.Kind == "ClusterRoleBinding" || head.Kind == "ClusterRole" {
			name, kind := obj.GetName(), head.Kind
			t.Cleanup(func() {
				rb := cp.Clientset().RbacV1()
				if kind == "ClusterRole" {
					_ = rb.ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
				} else {
					_ = rb.ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
				}
			})
		}
		roles = append(roles, obj)
	}
	cp.KubectlApply(t, out)
	cp.WaitGranted(t, user, roles)
}

func editFile(t *testing.T, path string, edit func(string) string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if edited := edit(string(data)); edited == string(data) {
		t.Fatalf("fixture %s unchanged", path)
	} else if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
}

// attemptEscalation is the deployer (kubeconfig kc, user) trying to become
// more than its print, with the release's Role ql3-control in ns and its
// ClusterRole reader installed. Each refusal must be the API server's 403,
// in its audit log.
func attemptEscalation(t *testing.T, kc, user, ns, reader string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	cfg.UserAgent = attackerAgent // the ceremony's own writes are told apart
	rb := kubernetes.NewForConfigOrDie(cfg).RbacV1()
	ctx := context.Background()
	star := []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}
	widen, _ := json.Marshal(map[string]any{"rules": star})
	self := []rbacv1.Subject{{Kind: "ServiceAccount", Name: user[strings.LastIndex(user, ":")+1:], Namespace: strings.Split(user, ":")[2]}}
	binding := func(name, kind, role string) *rbacv1.RoleBinding {
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role}
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, RoleRef: ref, Subjects: self}
	}
	attempts := []struct {
		what, verb, resource, ns, name string
		do                             func() error
	}{
		{"widen the release's Role to */*/*", "patch", "roles", ns, "ql3-control", func() error {
			_, err := rb.Roles(ns).Patch(ctx, "ql3-control", types.MergePatchType, widen, metav1.PatchOptions{})
			return err
		}},
		{"widen the release's ClusterRole to */*/*", "patch", "clusterroles", "", reader, func() error {
			_, err := rb.ClusterRoles().Patch(ctx, reader, types.MergePatchType, widen, metav1.PatchOptions{})
			return err
		}},
		{"create a Role granting */*/*", "create", "roles", ns, "ql3-attacker", func() error {
			_, err := rb.Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "ql3-attacker"}, Rules: star}, metav1.CreateOptions{})
			return err
		}},
		{"bind ClusterRole cluster-admin to itself in the namespace", "create", "rolebindings", ns, "ql3-attacker", func() error {
			_, err := rb.RoleBindings(ns).Create(ctx, binding("ql3-attacker", "ClusterRole", "cluster-admin"), metav1.CreateOptions{})
			return err
		}},
		{"bind ClusterRole cluster-admin to itself cluster-wide", "create", "clusterrolebindings", "", "ql3-attacker-" + ns, func() error {
			b := binding("ql3-attacker-"+ns, "ClusterRole", "cluster-admin")
			crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: b.Name}, RoleRef: b.RoleRef, Subjects: b.Subjects}
			_, err := rb.ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
			return err
		}},
	}
	for _, a := range attempts {
		if err := a.do(); !apierrors.IsForbidden(err) {
			t.Errorf("%s could %s: %v, want forbidden", user, a.what, err)
			continue
		}
		if codes := auditCodes(t, user, a.verb, a.resource, a.ns, a.name); len(codes) != 1 || codes[0] != 403 {
			t.Errorf("%s: the audit log holds %v for %s %s/%s, want one 403", a.what, codes, a.verb, a.resource, a.name)
		}
	}
	// What remains: bind cannot be limited by subject. Binding the
	// release's own Role to itself is allowed, and gives the deployer only
	// the rules it holds already (the print grants them); it still cannot
	// widen that Role.
	if _, err := rb.RoleBindings(ns).Create(ctx, binding("ql3-self", "Role", "ql3-control"), metav1.CreateOptions{}); err != nil {
		t.Errorf("%s binding the release's Role to itself: %v, want allowed (RBAC cannot limit bind by subject)", user, err)
	}
	if _, err := rb.Roles(ns).Patch(ctx, "ql3-control", types.MergePatchType, widen, metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("%s, bound to the release's Role, could widen it: %v", user, err)
	}
}

// attackerAgent is the user agent of the attacker's requests.
const attackerAgent = "ql3-attacker"

// auditCodes are the answers the API server logged to user's completed
// verb requests on resource/name in ns, sent as the attacker.
func auditCodes(t *testing.T, user, verb, resource, ns, name string) []int {
	t.Helper()
	evs, err := cp.Events(func(e testcluster.AuditEvent) bool {
		return e.Stage == "ResponseComplete" && e.User.Username == user && e.Verb == verb && e.ObjectRef.Resource == resource &&
			e.ObjectRef.Namespace == ns && e.ObjectRef.Name == name && e.UserAgent == attackerAgent
	})
	if err != nil {
		t.Fatal(err)
	}
	var codes []int
	for _, e := range evs {
		codes = append(codes, e.ResponseStatus.Code)
	}
	return codes
}
