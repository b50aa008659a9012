package deploy_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// A deployer missing one permission of `kubectl ql3 rbac` fails closed:
// refused (invalid) at preflight and, with a preflight made while it still
// held it, at apply, before any write, the Head not created. Regression
// test for holes the reliability campaign (hack/reliability, least
// privilege) found: without the Head's `update` an install applied every
// object and then could not commit; without `get` on an object the apply
// wrote everything and then waited out --timeout in the convergence read;
// without a rule of the release's Role (once `escalate`) or `bind`
// (revoked after the preflight) the apply wrote the objects before the
// Role or RoleBinding, then failed; without `list` on pods or replicasets
// converge could not say why a rollout does not progress.
func TestMissingPermissionFailsClosed(t *testing.T) {
	tests := []struct {
		name    string
		verb    string
		matches func(r rbacv1.PolicyRule) bool
		want    string // in the error; NS is the namespace
	}{
		{"head update", "update", func(r rbacv1.PolicyRule) bool { return slices.Contains(r.ResourceNames, deploy.HeadName) },
			"update configmaps/" + deploy.HeadName},
		{"get of a workload", "get", func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.Resources, "deployments") && len(r.ResourceNames) > 0
		},
			"get deployments.apps/ql3-admin"},
		{"get of the CRD", "get", func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.Resources, "customresourcedefinitions") && len(r.ResourceNames) > 0
		}, "get customresourcedefinitions.apiextensions.k8s.io/widgets.demo.qinglong.io"},
		// RBAC's escalation checks, which only a dry-run answers.
		// A rule of the release's Role (watch on widgets, the only rule
		// that grants watch on them): without it the deployer does not hold every
		// permission of the Role, so RBAC refuses to let it write one.
		{"a rule of the release's Role", "watch", func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.Resources, "widgets") && len(r.ResourceNames) == 0
		}, "rbac.authorization.k8s.io/v1/Role/NS/ql3-control"},
		{"bind of the release's Role", "bind", func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "roles") },
			"rbac.authorization.k8s.io/v1/RoleBinding/NS/ql3-control"},
		// converge explains a rollout that does not progress by its pods.
		{"list of pods", "list", func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "pods") },
			"list pods in namespace NS"},
		{"list of replicasets", "list", func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "replicasets") },
			"list replicasets.apps in namespace NS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // its own namespace, user and roles: most of each case is waiting on the API server
			ns := targetNamespace(t)
			dir := release(t, "v3.0.0", ns, "")
			admin := options(t, cluster(t, cp.RESTConfig()), t.TempDir())
			pf := preflight(t, admin, dir, deploy.TransitionInstall, deploy.ExpectedHead{})

			rel, err := inventory.Render(filesys.MakeFsOnDisk(), dir, inventory.Options{})
			if err != nil {
				t.Fatal(err)
			}
			user := "partial-" + ns
			objs, err := deploy.RBAC(rel.Objects, ns, cluster(t, cp.RESTConfig()).Mapper(), deploy.RBACSubject{User: user})
			if err != nil {
				t.Fatal(err)
			}
			removed := testcluster.DropVerb(objs, tt.verb, tt.matches)
			if removed != 1 {
				t.Fatalf("removed %d rules' %s, want 1", removed, tt.verb)
			}
			cp.GrantAll(t, objs)
			cp.WaitGranted(t, user, objs)

			want := strings.ReplaceAll(tt.want, "NS", ns)
			// Wrapped, as fault-injecting tests and callers wrap clusters:
			// the review is a capability of the interface, never skipped.
			o := options(t, wrapped{cluster(t, userConfig(t, user))}, t.TempDir())
			_, err = deploy.RunPreflight(context.Background(), o, deploy.PreflightRequest{Dir: dir, Transition: deploy.TransitionInstall, Out: t.TempDir() + "/pf.json"})
			if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), want) {
				t.Fatalf("preflight without %s: %v (class %v), want invalid naming %q", tt.name, err, fail.ClassOf(err), want)
			}
			_, err = deploy.RunApply(context.Background(), o, deploy.ApplyRequest{Preflight: pf.Record})
			if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "nothing was written") {
				t.Fatalf("apply without %s: %v (class %v), want invalid naming %q", tt.name, err, fail.ClassOf(err), want)
			}
			assertNoWrites(t, user, "")
			if h := headOf(t, ns); h != nil {
				t.Fatalf("the Head was created: %+v", h)
			}
		})
	}
}

// wrapped is a cluster wrapped by embedding, overriding nothing.
type wrapped struct{ deploy.Cluster }

// unreviewable is the real cluster, except that its permission reviews
// are forbidden: the access check fails closed, nothing is written.
type unreviewable struct{ deploy.Cluster }

func (unreviewable) CanI(context.Context, access.Access) (bool, error) {
	return false, apierrors.NewForbidden(schema.GroupResource{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}, "", errors.New("reviews withdrawn by the test"))
}

func (unreviewable) RulesIn(context.Context, string) ([]authorizationv1.ResourceRule, error) {
	return nil, apierrors.NewForbidden(schema.GroupResource{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"}, "", errors.New("reviews withdrawn by the test"))
}

func TestUnanswerableReviewFailsClosed(t *testing.T) {
	ns := targetNamespace(t)
	dir := release(t, "v3.0.0", ns, "")
	o := options(t, unreviewable{cluster(t, userConfig(t, "unreviewed", "system:masters"))}, t.TempDir())
	_, err := deploy.RunPreflight(context.Background(), o, deploy.PreflightRequest{Dir: dir, Transition: deploy.TransitionInstall, Out: t.TempDir() + "/pf.json"})
	if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "permission review") {
		t.Fatalf("preflight with reviews forbidden: %v (class %v), want invalid (fails closed)", err, fail.ClassOf(err))
	}
	if h := headOf(t, ns); h != nil {
		t.Fatalf("the Head was created: %+v", h)
	}
}

// A receipts directory that cannot hold the receipt is refused before any
// write: it used to fail only after the Head was committed (found by the
// reliability campaign's bad-input corpus: --receipts-dir naming a file).
func TestUnusableReceiptsDirRefusedBeforeWrites(t *testing.T) {
	ns := targetNamespace(t)
	dir := release(t, "v3.0.0", ns, "")
	admin := options(t, cluster(t, cp.RESTConfig()), t.TempDir())
	pf := preflight(t, admin, dir, deploy.TransitionInstall, deploy.ExpectedHead{})
	file := filepath.Join(t.TempDir(), "receipts")
	if err := os.WriteFile(file, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	user := "receipts-" + ns
	o := options(t, cluster(t, userConfig(t, user, "system:masters")), file)
	_, err := deploy.RunApply(context.Background(), o, deploy.ApplyRequest{Preflight: pf.Record})
	if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "receipts directory") {
		t.Fatalf("apply into a receipts directory that is a file: %v (class %v), want invalid", err, fail.ClassOf(err))
	}
	assertNoWrites(t, user, "")
	if h := headOf(t, ns); h != nil {
		t.Fatalf("the Head was created: %+v", h)
	}
}

// A command asks for a namespace's RBAC rules once, however many of its
// objects it checks at once. The check of a release's objects runs in
// parallel, and each check used to send its own rules review of the same
// namespace (ten for a five-object release, in preflight and again in
// apply): requests the API server answers in full. The audit log counts
// them; every namespaced object of the fixture is in ns, so one each.
func TestOneRulesReviewPerNamespacePerCommand(t *testing.T) {
	ns := targetNamespace(t)
	dir := release(t, "v3.0.0", ns, "")
	user := "rules-" + ns
	o := options(t, cluster(t, userConfig(t, user, "system:masters")), t.TempDir())
	pf := preflight(t, o, dir, deploy.TransitionInstall, deploy.ExpectedHead{})
	assertRulesReviews(t, user, 1)
	if _, err := deploy.RunApply(context.Background(), o, deploy.ApplyRequest{Preflight: pf.Record}); err != nil {
		t.Fatal(err)
	}
	assertRulesReviews(t, user, 2)
}

// assertRulesReviews fails unless user made exactly want rules reviews.
func assertRulesReviews(t *testing.T, user string, want int) {
	t.Helper()
	reviews, err := cp.Events(func(e testcluster.AuditEvent) bool {
		return e.User.Username == user && e.Stage == "ResponseComplete" && e.Verb == "create" && e.ObjectRef.Resource == "selfsubjectrulesreviews"
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(reviews) != want {
		t.Fatalf("%s made %d rules review(s), want %d", user, len(reviews), want)
	}
}
