package worker

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
	"github.com/qinglong/kubectl-ql3/ceremony/worker/workertest"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
)

// Stage, publish and discard-stage refuse a stage namespace that is unset
// or the Worker's own, before any request: token-bearing stages never sit
// beside the identity Secret.
func TestStageNamespaceMustDiffer(t *testing.T) {
	ns := cp.Namespace(t)
	workertest.Create(t, cp.Clientset(), ns)
	a := newDelivery(t, ns, "d-a", "cred-a", nil, 1)
	for _, stageNS := range []string{"", ns} {
		o := options(t, cp.User(t, "same-ns", "system:masters"), ns, stageNS)
		o.StageNamespace = stageNS
		_, serr := Stage(context.Background(), o, a, token("A"))
		_, perr := Publish(context.Background(), o, a)
		_, derr := Discard(context.Background(), o, "d-a", true)
		for i, err := range []error{serr, perr, derr} {
			if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "--stage-namespace") || !strings.Contains(err.Error(), delivery.IdentitySecret) {
				t.Fatalf("stage namespace %q, call %d: %v; want invalid naming --stage-namespace and %s", stageNS, i, err, delivery.IdentitySecret)
			}
		}
	}
	if w := writes(t, "same-ns", ns); len(w) != 0 {
		t.Fatalf("writes in the Worker's namespace: %v", w)
	}
	evs, err := cp.Events(func(e testcluster.AuditEvent) bool { return e.User.Username == "same-ns" })
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 0 {
		t.Fatalf("%d requests sent; the refusal must come before any", len(evs))
	}
}

// A stage records the Worker Deployment it is for (namespace/name and
// UID). Publish to a Deployment recreated under the same name is refused
// before any Secret write; discard-stage judges the recorded Deployment,
// refuses a --deployment that disagrees, and treats a Deployment of the
// recorded name with another UID as gone.
func TestStageRecordsDeployment(t *testing.T) {
	ns, stageNS := cp.Namespace(t), cp.Namespace(t)
	workertest.Create(t, cp.Clientset(), ns)
	o := options(t, cp.User(t, "recorder", "system:masters"), ns, stageNS)
	a := newDelivery(t, ns, "d-a", "cred-a", nil, 1)
	if _, err := Stage(context.Background(), o, a, token("A")); err != nil {
		t.Fatal(err)
	}
	first := getDep(t, ns)
	st, err := cp.Clientset().CoreV1().Secrets(stageNS).Get(context.Background(), delivery.StageName("d-a"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Annotations[AnnotationDeployment] != ns+"/"+depName || st.Annotations[AnnotationDeploymentUID] != string(first.UID) {
		t.Fatalf("stage annotations %v, want %s=%s/%s and %s=%s", st.Annotations, AnnotationDeployment, ns, depName, AnnotationDeploymentUID, first.UID)
	}
	// The Deployment is deleted and created again under the same name.
	if err := cp.Clientset().AppsV1().Deployments(ns).Delete(context.Background(), depName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cp.Clientset().CoreV1().Secrets(ns).Delete(context.Background(), delivery.IdentitySecret, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	workertest.Create(t, cp.Clientset(), ns)
	second := getDep(t, ns)
	_, err = Publish(context.Background(), o, a)
	if !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), string(first.UID)) || !strings.Contains(err.Error(), string(second.UID)) {
		t.Fatalf("publish to the recreated Deployment: %v; want a conflict naming both UIDs", err)
	}
	if _, err := cp.Clientset().CoreV1().Secrets(ns).Get(context.Background(), delivery.SecretName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("credential Secret after the refused publish: %v, want not found", err)
	}
	if vs := cp.WriteVerbs(t, "recorder", ns, "deployments"); len(vs) != 0 {
		t.Fatalf("the refused publish wrote the Deployment: %v", vs)
	}
	// discard-stage: a --deployment other than the recorded one is refused.
	other := o
	other.DeploymentName = "another-worker"
	if _, err := Discard(context.Background(), other, "d-a", true); !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), ns+"/"+depName) {
		t.Fatalf("discard with --deployment another-worker: %v; want invalid naming the recorded %s/%s", err, ns, depName)
	}
	// Without --deployment the recorded one is judged: the new Deployment
	// of that name is not the stage's, so the delivery is neither
	// published nor superseded there.
	o.DeploymentName = ""
	if _, err := Discard(context.Background(), o, "d-a", false); !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), "neither published nor superseded") {
		t.Fatalf("discard unpublished: %v", err)
	}
	if vs := cp.WriteVerbs(t, "recorder", stageNS, "secrets"); strings.Contains(strings.Join(vs, " "), "delete") {
		t.Fatalf("a refused discard deleted: %v", vs)
	}
	dr, err := Discard(context.Background(), o, "d-a", true)
	if err != nil || dr.Reason != "abandoned" || dr.Deployment != ns+"/"+depName {
		t.Fatalf("discard abandoned: %+v %v", dr, err)
	}
}

// A half-publication on the superseded path: the credential Secret holds
// the stage's token (its publish wrote the Secret and crashed) while the
// PodTemplate carries a later generation of another delivery. The stage
// is the only record of that token: discard-stage refuses (conflict) and
// deletes nothing.
func TestDiscardSupersededHalfPublished(t *testing.T) {
	ns, stageNS := cp.Namespace(t), cp.Namespace(t)
	workertest.Create(t, cp.Clientset(), ns)
	o := options(t, cp.User(t, "half", "system:masters"), ns, stageNS)
	stagePublish(t, o, newDelivery(t, ns, "d-a", "cred-a", nil, 1), token("A"))
	b := newDelivery(t, ns, "d-b", "cred-b", ptr("cred-a"), 2)
	if _, err := Stage(context.Background(), o, b, token("B")); err != nil {
		t.Fatal(err)
	}
	crashAfterSecret(t, o, b)
	// Another hand stamps the PodTemplate with generation 3 of delivery
	// d-c, leaving the Secret as the crash left it (holding B's token).
	c := newDelivery(t, ns, "d-c", "cred-c", ptr("cred-a"), 3)
	target, err := delivery.TargetDigest(c.Target)
	if err != nil {
		t.Fatal(err)
	}
	td, err := delivery.TokenDigest(key, target, c.CredentialID, token("C"))
	if err != nil {
		t.Fatal(err)
	}
	stamp, _, err := delivery.StampOf(c, td)
	if err != nil {
		t.Fatal(err)
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error { // the controller writes its status meanwhile
		_, err := cp.Clientset().AppsV1().Deployments(ns).Update(context.Background(), Stamped(getDep(t, ns), stamp), metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if s := getSecret(t, ns); s == nil || string(s.Data[delivery.SecretKey]) != string(token("B")) {
		t.Fatal("the credential Secret does not hold B's token: not a half-publication")
	}
	_, err = Discard(context.Background(), o, "d-b", false)
	if !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), "half-published") {
		t.Fatalf("discard of a superseded, half-published stage: %v; want a conflict", err)
	}
	if vs := cp.WriteVerbs(t, "half", stageNS, "secrets"); strings.Contains(strings.Join(vs, " "), "delete") {
		t.Fatalf("the refused discard deleted: %v", vs)
	}
	// Once the Secret no longer holds B's token, the stage is superseded.
	sec := getSecret(t, ns)
	sec.Data = map[string][]byte{delivery.SecretKey: token("C")}
	if _, err := cp.Clientset().CoreV1().Secrets(ns).Update(context.Background(), sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if dr, err := Discard(context.Background(), o, "d-b", false); err != nil || dr.Reason != "superseded" {
		t.Fatalf("discard superseded: %+v %v", dr, err)
	}
}

// crashAfterSecret runs publish of d with o until it crashes between the
// credential Secret write and the Deployment update.
func crashAfterSecret(t *testing.T, o Options, d *delivery.Delivery) {
	t.Helper()
	o.Crash = func(p string) {
		if p == CrashAfterSecret {
			panic("crash")
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("no crash")
		}
	}()
	_, _ = Publish(context.Background(), o, d)
}
