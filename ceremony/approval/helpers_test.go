package approval_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/approval"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate/gatetest"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/receipts"
)

var cp *testcluster.ControlPlane

func TestMain(m *testing.M) {
	testcluster.Main(m, testcluster.Options{AuditLog: true}, &cp)
}

// sum is a digest computed from s (the records here need well-formed,
// distinct digests; approval never looks inside the release).
func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(h[:])
}

// preflightRecord writes an install preflight record of version for ns,
// sealed by deploy (its digests computed as preflight computes them), and
// checks that apply's reader accepts it.
func preflightRecord(t *testing.T, ns, version string) string {
	t.Helper()
	id, err := deploy.ReadClusterIdentity(context.Background(), deploy.NewIdentityReader(cp.Clientset()))
	if err != nil {
		t.Fatal(err)
	}
	lock, inv := sum("lock "+version), sum("inventory "+version)
	rec := &deploy.PreflightRecord{
		Schema: deploy.PreflightSchema,
		Command: deploy.Command{Transition: deploy.TransitionInstall, Version: version, LockDigest: lock, InventoryDigest: inv,
			ClusterIdentity: id, Namespace: ns, FieldManager: "kubectl-ql3"},
		Release: deploy.PreflightRelease{Dir: "/release", Version: version, LockDigest: lock, SourceDigest: sum("source"), RenderDigest: sum("render"), InventoryDigest: inv},
		Target:  receipts.Target{ClusterIdentity: id, Namespace: ns},
		Tool:    receipts.Tool{Name: "kubectl-ql3", Version: "v0.1.0", FieldManager: "kubectl-ql3"},
		Steps:   deploy.PreflightSteps{Identity: sum("identity"), DryRun: sum("dry-run")},
	}
	if err := rec.Seal(); err != nil {
		t.Fatal(err)
	}
	data, err := rec.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "pf-"+version+".json")
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := deploy.ReadPreflight(path); err != nil {
		t.Fatalf("apply's reader refuses the test record: %v", err)
	}
	return path
}

// clients are user's clients (a client certificate: the API server
// authenticates user), with wrap on its transport when given.
func clients(t *testing.T, user string) approval.Clients {
	t.Helper()
	return mustClients(t, cp.User(t, user))
}

func mustClients(t *testing.T, cfg *rest.Config) approval.Clients {
	t.Helper()
	c, err := approval.NewClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// grant applies role's printed RBAC for user in ns as the admin, less the
// verb drop of the rule number dropRule (-1: as printed). Cluster-scoped
// objects get a per-test name suffix so that grants never leak between
// tests.
func grant(t *testing.T, role, ns, user string, dropRule int, drop string) {
	t.Helper()
	objs, err := approval.RBAC(role, ns, access.Subject{User: user})
	if err != nil {
		t.Fatal(err)
	}
	applyRBAC(t, objs, user, dropRule, drop)
}

// applyRBAC creates objs as the admin, each renamed for user, less the
// verb drop of rule dropRule (counted over the Role's rules, then the
// ClusterRole's).
func applyRBAC(t *testing.T, objs []any, user string, dropRule int, drop string) {
	t.Helper()
	ctx := context.Background()
	rb := cp.Clientset().RbacV1()
	suffix := "-" + strings.NewReplacer(":", "-").Replace(user)
	n := 0
	thin := func(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
		var out []rbacv1.PolicyRule
		for _, r := range rules {
			if n == dropRule {
				r.Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == drop })
			}
			n++
			if len(r.Verbs) > 0 {
				out = append(out, r)
			}
		}
		return out
	}
	var err error
	for _, o := range objs {
		switch o := o.(type) {
		case *rbacv1.Role:
			o.Name += suffix
			o.Rules = thin(o.Rules)
			_, err = rb.Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			o.Name += suffix
			o.RoleRef.Name += suffix
			_, err = rb.RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			o.Name += suffix
			o.Rules = thin(o.Rules)
			_, err = rb.ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			name := o.Name
			t.Cleanup(func() { _ = rb.ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{}) })
		case *rbacv1.ClusterRoleBinding:
			o.Name += suffix
			o.RoleRef.Name += suffix
			_, err = rb.ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			name := o.Name
			t.Cleanup(func() { _ = rb.ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{}) })
		default:
			t.Fatalf("unexpected RBAC object %T", o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// rulesOf counts the printed rules of role and lists each (rule, verb).
func rulesOf(t *testing.T, role string) [][2]any {
	t.Helper()
	objs, err := approval.RBAC(role, "ns", access.Subject{})
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]any
	n := 0
	for _, o := range objs {
		var rules []rbacv1.PolicyRule
		switch o := o.(type) {
		case *rbacv1.Role:
			rules = o.Rules
		case *rbacv1.ClusterRole:
			rules = o.Rules
		}
		for _, r := range rules {
			for _, v := range r.Verbs {
				out = append(out, [2]any{n, v})
			}
			n++
		}
	}
	return out
}

// installPolicy applies the printed policy as the admin and waits until
// the API server enforces it.
func installPolicy(t *testing.T) { gatetest.Install(t, cp.Clientset(), cp.Namespace(t)) }

func contains(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }
