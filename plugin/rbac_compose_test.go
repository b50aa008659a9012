package plugin_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
)

// rbacPrint is one `rbac` command run for one subject and scope.
type rbacPrint struct {
	user string
	args []string // the command and its scope, without --bind-user
}

// Issue #22 item 8: printed RBAC composes. For every `rbac` command, the
// output for one user and scope and the output for another user (and
// another package, Worker, namespace or release, or the same one) are
// applied with kubectl, one after the other, as a user pipes them; then
// every object of every print is live exactly as printed (no later print
// replaced it) and each user still holds every verb of every rule its
// print granted (SelfSubjectAccessReview as that user). With fixed names
// the second print replaced the first one's bindings (and `worker rbac`
// its Role), so the first user lost its access.
func TestRBACPrintsCompose(t *testing.T) {
	nsA, nsB := controlNamespace(t), controlNamespace(t)
	relA, relB := releaseCopy(t, "v3.0.0", nsA, ""), releaseCopy(t, "v3.0.0", nsB, "")
	wk, stages := controlNamespace(t), controlNamespace(t)
	u := func(s string) string { return s + "-" + nsA } // users unique to this run
	for _, tc := range []struct {
		name   string
		prints []rbacPrint
		after  func(t *testing.T)
	}{
		{"rbac", []rbacPrint{
			{u("deployer1"), []string{"rbac", relA}},
			{u("deployer2"), []string{"rbac", relB}},
			{u("deployer3"), []string{"rbac", relA}}, // the same release, a second deployer
		}, func(t *testing.T) {
			// The first deployer's own command still runs.
			kc, err := cp.Kubeconfig(u("deployer1"))
			if err != nil {
				t.Fatal(err)
			}
			mustRun(t, []string{"KUBECONFIG=" + kc}, "head", "-n", nsA)
		}},
		{"package rbac", []rbacPrint{
			{u("pkg1"), []string{"package", "rbac", "--project", "demo", "--package", "weather-tools", "-n", nsA}},
			{u("pkg2"), []string{"package", "rbac", "--project", "demo", "--package", "news-tools", "-n", nsB}},
		}, nil},
		{"worker rbac", []rbacPrint{
			{u("rotator1"), []string{"worker", "rbac", "-n", wk, "--deployment", "worker-a", "--stage-namespace", stages}},
			{u("rotator2"), []string{"worker", "rbac", "-n", wk, "--deployment", "worker-b", "--stage-namespace", stages}},
			{u("rotator3"), []string{"worker", "rbac", "-n", nsB, "--deployment", "worker-a", "--stage-namespace", stages}},
		}, nil},
		{"keyset rbac", []rbacPrint{
			{u("keys1"), []string{"keyset", "rbac", "-n", nsA}},
			{u("keys2"), []string{"keyset", "rbac", "-n", nsA}}, // a second publisher in one namespace
			{u("keys3"), []string{"keyset", "rbac", "-n", nsB}},
		}, nil},
		{"env-bundle rbac", []rbacPrint{
			{u("env1"), []string{"env-bundle", "rbac", "-n", nsA, "--name", "task-1-env"}},
			{u("env2"), []string{"env-bundle", "rbac", "-n", nsA, "--name", "task-2-env"}},
			{u("env3"), []string{"env-bundle", "rbac", "-n", nsB, "--name", "task-1-env"}},
			{u("env4"), []string{"env-bundle", "rbac", "-n", nsA, "--name", "task-1-env"}}, // a second publisher of one bundle
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			printed := make([][]*unstructured.Unstructured, len(tc.prints))
			for i, p := range tc.prints {
				out := mustRun(t, nil, append(p.args, "--bind-user", p.user)...)
				kubectlApplyAdmin(t, out)
				printed[i] = rbacObjects(t, out)
			}
			for i, p := range tc.prints {
				for _, obj := range printed[i] {
					requireLiveAsPrinted(t, obj)
				}
				requireGranted(t, p.user, printed[i])
			}
			if tc.after != nil {
				tc.after(t)
			}
		})
	}
}

// kubectlApplyAdmin pipes manifest into the control plane's `kubectl
// apply -f -` as the admin; cluster-scoped objects are deleted after the
// test.
func kubectlApplyAdmin(t *testing.T, manifest string) {
	t.Helper()
	cp.KubectlApply(t, manifest)
	for _, u := range rbacObjects(t, manifest) {
		rb, name := cp.Clientset().RbacV1(), u.GetName()
		switch u.GetKind() {
		case "ClusterRole":
			t.Cleanup(func() { _ = rb.ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{}) })
		case "ClusterRoleBinding":
			t.Cleanup(func() { _ = rb.ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{}) })
		}
	}
}

// rbacObjects decodes the multi-document YAML an `rbac` command prints.
func rbacObjects(t *testing.T, manifest string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("decode the rbac output: %v\n%s", err, manifest)
		}
		out = append(out, u)
	}
}

// rbacObject is the part of a Role, ClusterRole or binding that grants.
type rbacObject struct {
	Rules    []rbacv1.PolicyRule `json:"rules,omitempty"`
	Subjects []rbacv1.Subject    `json:"subjects,omitempty"`
	RoleRef  rbacv1.RoleRef      `json:"roleRef,omitempty"`
}

// requireLiveAsPrinted fails unless the live object named as printed
// grants exactly what the print says (no other print replaced it).
func requireLiveAsPrinted(t *testing.T, printed *unstructured.Unstructured) {
	t.Helper()
	ctx, rb := context.Background(), cp.Clientset().RbacV1()
	ns, name := printed.GetNamespace(), printed.GetName()
	var live any
	var err error
	switch printed.GetKind() {
	case "Role":
		live, err = rb.Roles(ns).Get(ctx, name, metav1.GetOptions{})
	case "ClusterRole":
		live, err = rb.ClusterRoles().Get(ctx, name, metav1.GetOptions{})
	case "RoleBinding":
		live, err = rb.RoleBindings(ns).Get(ctx, name, metav1.GetOptions{})
	case "ClusterRoleBinding":
		live, err = rb.ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{})
	default:
		t.Fatalf("rbac printed a %s", printed.GetKind())
	}
	if err != nil {
		t.Fatalf("%s %s/%s: %v", printed.GetKind(), ns, name, err)
	}
	liveMap, err := runtime.DefaultUnstructuredConverter.ToUnstructured(live)
	if err != nil {
		t.Fatal(err)
	}
	var want, got rbacObject
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(printed.Object, &want); err != nil {
		t.Fatal(err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(liveMap, &got); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(want, got) {
		t.Errorf("%s %s/%s was replaced by another print:\nprinted %+v\nlive    %+v", printed.GetKind(), ns, name, want, got)
	}
}

// requireGranted asks, as user, a SelfSubjectAccessReview for every verb
// (and every resource name) of every rule of the printed roles, and fails
// on any denial once the grant has had 10s to reach the RBAC authorizer
// (one deadline for all of the user's reviews).
func requireGranted(t *testing.T, user string, printed []*unstructured.Unstructured) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cp.User(t, user))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	asked, lost := 0, []string(nil)
	for _, u := range printed {
		if u.GetKind() != "Role" && u.GetKind() != "ClusterRole" {
			continue
		}
		var role rbacObject
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err != nil {
			t.Fatal(err)
		}
		for _, r := range role.Rules {
			names := r.ResourceNames
			if len(names) == 0 {
				names = []string{""}
			}
			for _, verb := range r.Verbs {
				for _, name := range names {
					ra := authorizationv1.ResourceAttributes{Verb: verb, Group: r.APIGroups[0], Resource: r.Resources[0], Namespace: u.GetNamespace(), Name: name}
					if !allowedBy(t, cs, ra, deadline) {
						lost = append(lost, fmt.Sprintf("%s %s/%s %q in %q (granted by %s %s)", verb, ra.Group, ra.Resource, name, ra.Namespace, u.GetKind(), u.GetName()))
					}
					asked++
				}
			}
		}
	}
	if asked == 0 {
		t.Fatalf("%s: the print grants nothing: the test would prove nothing", user)
	}
	if len(lost) > 0 {
		t.Errorf("%s lost %d of the %d permissions its print granted, first %s", user, len(lost), asked, lost[0])
	}
}

// allowedBy polls a SelfSubjectAccessReview until it is allowed or the
// deadline has passed.
func allowedBy(t *testing.T, cs kubernetes.Interface, ra authorizationv1.ResourceAttributes, deadline time.Time) bool {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var reviewErr error
	allowed := func(ctx context.Context) (bool, error) {
		r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &ra}}
		got, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, r, metav1.CreateOptions{})
		if err != nil && ctx.Err() == nil {
			reviewErr = err
			return false, err
		}
		return err == nil && got.Status.Allowed, nil
	}
	if err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, allowed); reviewErr != nil {
		t.Fatalf("SelfSubjectAccessReview %+v: %v", ra, reviewErr)
	} else if err != nil {
		return false
	}
	return true
}
