package worker

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
	"github.com/qinglong/kubectl-ql3/ceremony/worker/workertest"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/faults"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// The publish claims are proven against a real kube-apiserver + etcd with
// kube-controller-manager (the Deployment really rolls), its RBAC
// authorizer and its audit log.
var cp *testcluster.ControlPlane

func TestMain(m *testing.M) {
	testcluster.Main(m, testcluster.Options{ControllerManager: true, AuditLog: true}, &cp)
}

const depName = workertest.DeploymentName

var key = []byte("test-token-digest-key-0123456789abcdef")

// Tokens of the tests: canaries that must appear nowhere but the Secrets.
func token(n string) []byte { return []byte("CANARY-ql3-worker-token-" + n + "-9f8e7d6c") }

func newDelivery(t *testing.T, ns, id, cred string, pred *string, gen int64) *delivery.Delivery {
	t.Helper()
	d := &delivery.Delivery{Schema: delivery.Schema, DeliveryID: id, CredentialID: cred, Predecessor: pred, Generation: gen,
		Target: delivery.Target{ClusterIdentity: canon.ClusterIdentity(cp.KubeSystemUID(t)), Namespace: ns, Secret: delivery.SecretName, Key: delivery.SecretKey, Deployment: depName}}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	return d
}

func ptr(s string) *string { return &s }

func options(t *testing.T, cfg *rest.Config, ns, stageNS string) Options {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return Options{
		Namespace: ns, Secrets: cs.CoreV1().Secrets(ns), Deployments: cs.AppsV1().Deployments(ns), DeploymentName: depName,
		DeploymentObjects: workertest.Objects(t, cfg, ns),
		ReplicaSets:       cs.AppsV1().ReplicaSets(ns), Pods: cs.CoreV1().Pods(ns),
		StageNamespace: stageNS, Stages: cs.CoreV1().Secrets(stageNS),
		ClusterIdentity: func(ctx context.Context) (string, error) {
			n, err := cs.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
			if err != nil {
				return "", cas.Classify(cas.OpRead, "read the cluster identity", err)
			}
			return canon.ClusterIdentity(string(n.UID)), nil
		},
		Key: key, Review: access.NewReview(access.NewReviewer(cs)), Hint: "`kubectl ql3 worker rbac` prints the least privilege",
		Say: t.Logf, SettleTimeout: 20 * time.Second,
	}
}

func getDep(t *testing.T, ns string) *appsv1.Deployment {
	t.Helper()
	d, err := cp.Clientset().AppsV1().Deployments(ns).Get(context.Background(), depName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func getSecret(t *testing.T, ns string) *corev1.Secret {
	t.Helper()
	s, err := cp.Clientset().CoreV1().Secrets(ns).Get(context.Background(), delivery.SecretName, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return s
}

func stagePublish(t *testing.T, o Options, d *delivery.Delivery, tok []byte) *Result {
	t.Helper()
	if _, err := Stage(context.Background(), o, d, tok); err != nil {
		t.Fatalf("stage %s: %v", d.DeliveryID, err)
	}
	r, err := Publish(context.Background(), o, d)
	if err != nil {
		t.Fatalf("publish %s: %v", d.DeliveryID, err)
	}
	return r
}

// writes lists "verb resource/name" of the writes user sent in ns.
func writes(t *testing.T, user, ns string) []string {
	t.Helper()
	var out []string
	for _, e := range cp.WritesBy(t, user, ns) {
		out = append(out, e.Verb+" "+e.ObjectRef.Resource+"/"+e.ObjectRef.Name)
	}
	return out
}

// waitRolled waits until the Deployment's controller observed the latest
// generation and a ReplicaSet of the current template holds one replica,
// the others zero.
func waitRolled(t *testing.T, ns string) {
	t.Helper()
	cs := cp.Clientset()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		d := getDep(t, ns)
		rss, err := cs.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rev := d.Annotations["deployment.kubernetes.io/revision"]
		ok := d.Status.ObservedGeneration == d.Generation && len(rss.Items) > 0
		for _, rs := range rss.Items {
			want := int32(0)
			if rs.Annotations["deployment.kubernetes.io/revision"] == rev {
				want = 1
			}
			ok = ok && rs.Spec.Replicas != nil && *rs.Spec.Replicas == want
		}
		if ok {
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatalf("Deployment %s/%s did not roll", ns, depName)
}

// TestRotation: A → B → C, distinct publication digests, the Deployment
// rolled by Recreate — from the API server's own record of the
// controller's writes: every ReplicaSet is created only after the previous
// one was scaled (updated) — and the annotations and nothing else changed.
func TestRotation(t *testing.T) {
	ns, stageNS := cp.Namespace(t), cp.Namespace(t)
	workertest.Create(t, cp.Clientset(), ns)
	waitRolled(t, ns)
	o := options(t, cp.User(t, "rotator", "system:masters"), ns, stageNS)
	before := getDep(t, ns)
	a := newDelivery(t, ns, "d-a", "cred-a", nil, 1)
	b := newDelivery(t, ns, "d-b", "cred-b", ptr("cred-a"), 2)
	c := newDelivery(t, ns, "d-c", "cred-c", ptr("cred-b"), 3)
	var digests []string
	for i, step := range []struct {
		d   *delivery.Delivery
		tok []byte
	}{{a, token("A")}, {b, token("B")}, {c, token("C")}} {
		r := stagePublish(t, o, step.d, step.tok)
		if slices.Contains(digests, r.PublicationDigest) {
			t.Fatalf("publication digest repeated: %v", digests)
		}
		digests = append(digests, r.PublicationDigest)
		dep, sec := getDep(t, ns), getSecret(t, ns)
		if dep.Spec.Template.Annotations[delivery.AnnotationPublicationDigest] != r.PublicationDigest || sec == nil || string(sec.Data[delivery.SecretKey]) != string(step.tok) {
			t.Fatalf("step %d: annotations %v", i, dep.Spec.Template.Annotations)
		}
		waitRolled(t, ns)
		// Replay: nothing written.
		r2, err := Publish(context.Background(), o, step.d)
		if err != nil || r2.DeploymentAction != "unchanged" || r2.Secret != "unchanged" || r2.PublicationDigest != r.PublicationDigest {
			t.Fatalf("replay: %+v %v", r2, err)
		}
	}
	// Only the five annotations changed in the PodTemplate.
	after := getDep(t, ns)
	tb, ta := before.Spec.Template.DeepCopy(), after.Spec.Template.DeepCopy()
	for _, k := range delivery.Annotations {
		delete(ta.Annotations, k)
	}
	if fmt.Sprint(tb) != fmt.Sprint(ta) {
		t.Fatalf("the PodTemplate changed beyond the five annotations:\n%v\n%v", tb, ta)
	}
	// Recreate, from the controller's writes of ReplicaSets in order: a
	// ReplicaSet is created only when every other one was scaled to 0.
	evs, err := cp.Writes(func(e testcluster.AuditEvent) bool {
		return e.ObjectRef.Namespace == ns && e.ObjectRef.Resource == "replicasets"
	})
	if err != nil {
		t.Fatal(err)
	}
	var created []string
	for _, e := range evs {
		if e.Verb == "create" && e.ResponseStatus.Code == 201 {
			created = append(created, e.ObjectRef.Name)
		}
	}
	if len(created) != 4 {
		t.Fatalf("ReplicaSets created: %v, want 4 (initial, A, B, C)", created)
	}
	rss, _ := cp.Clientset().AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{})
	for _, rs := range rss.Items {
		if rs.Name != created[3] && (*rs.Spec.Replicas != 0 || rs.Status.Replicas != 0) {
			t.Fatalf("old ReplicaSet %s not at 0", rs.Name)
		}
	}
	for i := 1; i < len(created); i++ {
		// Between the create of created[i-1] and created[i], the
		// controller updated created[i-1] (its scale to 0) before
		// creating created[i].
		scaled := false
		for _, e := range evs {
			if e.Verb == "create" && e.ObjectRef.Name == created[i] {
				break
			}
			if e.Verb == "update" && e.ObjectRef.Name == created[i-1] && e.ObjectRef.Resource == "replicasets" {
				scaled = true
			}
		}
		if !scaled {
			t.Fatalf("ReplicaSet %s was created before %s was scaled down: not Recreate", created[i], created[i-1])
		}
	}
	// The canary: no token in any annotation or label of either object.
	for _, tok := range [][]byte{token("A"), token("B"), token("C")} {
		if strings.Contains(fmt.Sprint(after.ObjectMeta, after.Spec.Template.ObjectMeta), string(tok)) {
			t.Fatal("a token appears in the Deployment's metadata")
		}
	}
}

// A crash between the Secret and the Deployment writes: the rerun
// converges without rewriting the Secret.
func TestCrashBetweenWrites(t *testing.T) {
	ns, stageNS := cp.Namespace(t), cp.Namespace(t)
	workertest.Create(t, cp.Clientset(), ns)
	o := options(t, cp.User(t, "crasher", "system:masters"), ns, stageNS)
	a := newDelivery(t, ns, "d-a", "cred-a", nil, 1)
	stagePublish(t, o, a, token("A"))
	b := newDelivery(t, ns, "d-b", "cred-b", ptr("cred-a"), 2)
	if _, err := Stage(context.Background(), o, b, token("B")); err != nil {
		t.Fatal(err)
	}
	crashAfterSecret(t, o, b)
	sec := getSecret(t, ns)
	if string(sec.Data[delivery.SecretKey]) != string(token("B")) || getDep(t, ns).Spec.Template.Annotations[delivery.AnnotationCredentialID] != "cred-a" {
		t.Fatal("the crash did not land between the writes")
	}
	r, err := Publish(context.Background(), o, b)
	if err != nil || r.Secret != "unchanged" || r.DeploymentAction != "updated" {
		t.Fatalf("rerun: %+v %v", r, err)
	}
	if s := getSecret(t, ns); s.ResourceVersion != sec.ResourceVersion {
		t.Fatal("the rerun rewrote the Secret")
	}
	// The stage of a published delivery is discarded with preconditions;
	// an unpublished one is refused.
	c := newDelivery(t, ns, "d-c", "cred-c", ptr("cred-b"), 3)
	if _, err := Stage(context.Background(), o, c, token("C")); err != nil {
		t.Fatal(err)
	}
	if _, err := Discard(context.Background(), o, "d-c", false); !fail.Is(err, fail.Conflict) {
		t.Fatalf("discard unpublished: %v", err)
	}
	dr, err := Discard(context.Background(), o, "d-b", false)
	if err != nil || dr.Outcome != cas.Deleted || dr.Reason != "published" {
		t.Fatalf("discard published: %+v %v", dr, err)
	}
	dr, err = Discard(context.Background(), o, "d-c", true)
	if err != nil || dr.Outcome != cas.Deleted || dr.Reason != "abandoned" {
		t.Fatalf("discard abandoned: %+v %v", dr, err)
	}
	evs, _ := cp.Writes(func(e testcluster.AuditEvent) bool {
		return e.Verb == "delete" && e.ObjectRef.Namespace == stageNS
	})
	for _, e := range evs {
		if !strings.Contains(string(e.RequestObject), `"uid"`) || !strings.Contains(string(e.RequestObject), `"resourceVersion"`) {
			t.Fatalf("delete without UID and resourceVersion preconditions: %s", e.RequestObject)
		}
	}
	if len(evs) != 2 {
		t.Fatalf("deletes: %d, want 2", len(evs))
	}
}

// Wrong predecessor, a stale generation, a replayed id with another token,
// the stage cap: each refused before any Secret write.
func TestRefusals(t *testing.T) {
	ns, stageNS := cp.Namespace(t), cp.Namespace(t)
	workertest.Create(t, cp.Clientset(), ns)
	o := options(t, cp.User(t, "refused", "system:masters"), ns, stageNS)
	stagePublish(t, o, newDelivery(t, ns, "d-a", "cred-a", nil, 1), token("A"))
	base := len(writes(t, "refused", ns))
	for _, d := range []*delivery.Delivery{
		newDelivery(t, ns, "d-x", "cred-x", ptr("cred-z"), 2),
		newDelivery(t, ns, "d-y", "cred-y", ptr("cred-a"), 1),
		newDelivery(t, ns, "d-w", "cred-w", nil, 5),
	} {
		if _, err := Stage(context.Background(), o, d, token("X")); err != nil {
			t.Fatal(err)
		}
		if _, err := Publish(context.Background(), o, d); !fail.Is(err, fail.Conflict) {
			t.Fatalf("%s: %v, want conflict", d.DeliveryID, err)
		}
	}
	if w := writes(t, "refused", ns); len(w) != base {
		t.Fatalf("refused publishes wrote in the Worker namespace: %v", w[base:])
	}
	if _, err := Stage(context.Background(), o, newDelivery(t, ns, "d-x", "cred-x", ptr("cred-z"), 2), token("Y")); !fail.Is(err, fail.Conflict) {
		t.Fatalf("same delivery id, another token: %v", err)
	}
	o.StageCap = 4 // d-a, d-x, d-y, d-w are live
	if _, err := Stage(context.Background(), o, newDelivery(t, ns, "d-v", "cred-v", ptr("cred-a"), 2), token("V")); !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), "cap") {
		t.Fatalf("stage over the cap: %v", err)
	}
	other := newDelivery(t, ns, "d-o", "cred-o", ptr("cred-a"), 2)
	other.Target.ClusterIdentity = canon.ClusterIdentity("another-cluster")
	if _, err := Publish(context.Background(), o, other); !fail.Is(err, fail.Invalid) {
		t.Fatalf("another cluster: %v", err)
	}
}

// Two publishers of different deliveries with the same predecessor: one
// winner, the other a conflict, the Deployment carrying the winner and
// the Secret the winner's token.
func TestConcurrentPublishers(t *testing.T) {
	ns, stageNS := cp.Namespace(t), cp.Namespace(t)
	workertest.Create(t, cp.Clientset(), ns)
	o1 := options(t, cp.User(t, "racer-1", "system:masters"), ns, stageNS)
	o2 := options(t, cp.User(t, "racer-2", "system:masters"), ns, stageNS)
	stagePublish(t, o1, newDelivery(t, ns, "d-a", "cred-a", nil, 1), token("A"))
	d1 := newDelivery(t, ns, "d-1", "cred-1", ptr("cred-a"), 2)
	d2 := newDelivery(t, ns, "d-2", "cred-2", ptr("cred-a"), 2)
	if _, err := Stage(context.Background(), o1, d1, token("1")); err != nil {
		t.Fatal(err)
	}
	if _, err := Stage(context.Background(), o2, d2, token("2")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, p := range []struct {
		o Options
		d *delivery.Delivery
	}{{o1, d1}, {o2, d2}} {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = Publish(context.Background(), p.o, p.d) }()
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if won >= 0 {
				t.Fatal("two winners")
			}
			won = i
		case !fail.Is(err, fail.Conflict):
			t.Fatalf("loser %d: %v, want conflict", i, err)
		}
	}
	if won < 0 {
		t.Fatalf("no winner: %v", errs)
	}
	wantCred, wantTok := []string{"cred-1", "cred-2"}[won], []string{"1", "2"}[won]
	if getDep(t, ns).Spec.Template.Annotations[delivery.AnnotationCredentialID] != wantCred || string(getSecret(t, ns).Data[delivery.SecretKey]) != string(token(wantTok)) {
		t.Fatal("the Deployment and the Secret do not both hold the winner")
	}
}

// Lost answers of each write settle by reading back.
func TestLostAnswers(t *testing.T) {
	ns, stageNS := cp.Namespace(t), cp.Namespace(t)
	workertest.Create(t, cp.Clientset(), ns)
	cfg := cp.User(t, "lossy", "system:masters")
	fs := []*faults.Fault{
		faults.Drop(cfg, faults.Write(http.MethodPost, "/namespaces/"+stageNS+"/secrets")),
		faults.Drop(cfg, faults.Write(http.MethodPost, "/namespaces/"+ns+"/secrets")),
		faults.Drop(cfg, faults.Write(http.MethodPut, "/namespaces/"+ns+"/deployments/"+depName)),
		faults.Drop(cfg, faults.Write(http.MethodPut, "/namespaces/"+ns+"/secrets/"+delivery.SecretName)),
		faults.Drop(cfg, faults.Write(http.MethodDelete, "/namespaces/"+stageNS+"/secrets/")),
	}
	o := options(t, cfg, ns, stageNS)
	r := stagePublish(t, o, newDelivery(t, ns, "d-a", "cred-a", nil, 1), token("A"))
	if !r.Settled {
		t.Fatalf("first publish not settled: %+v", r)
	}
	r = stagePublish(t, o, newDelivery(t, ns, "d-b", "cred-b", ptr("cred-a"), 2), token("B"))
	if !r.Settled || r.Secret != "updated" {
		t.Fatalf("second publish: %+v", r)
	}
	if dr, err := Discard(context.Background(), o, "d-a", false); err != nil || dr.Outcome != cas.Deleted {
		t.Fatalf("discard with a lost answer: %+v %v", dr, err)
	}
	for i, f := range fs {
		if f.Fired() != 1 {
			t.Fatalf("fault %d fired %d times", i, f.Fired())
		}
	}
}

// The least privilege `worker rbac` prints is enough, and its holder
// never asks for ql3-worker-identity (its client's own record of every
// request) and cannot (RBAC).
func TestLeastPrivilege(t *testing.T) {
	ns, stageNS := cp.Namespace(t), cp.Namespace(t)
	workertest.Create(t, cp.Clientset(), ns)
	objs, err := RBAC(ns, stageNS, depName, Subject{User: "rotator-rbac"})
	if err != nil {
		t.Fatal(err)
	}
	revokeRole := cp.GrantAll(t, objs[:1]) // the Role in the Worker's namespace
	cp.GrantAll(t, objs[1:])
	cs := cp.Clientset()
	ctx := context.Background()
	cfg, err := cp.UserConfig("rotator-rbac")
	if err != nil {
		t.Fatal(err)
	}
	rec := &faults.Recorder{}
	cfg.Wrap(rec.Wrap)
	o := options(t, cfg, ns, stageNS)
	stagePublish(t, o, newDelivery(t, ns, "d-a", "cred-a", nil, 1), token("A"))
	stagePublish(t, o, newDelivery(t, ns, "d-b", "cred-b", ptr("cred-a"), 2), token("B"))
	if _, err := Discard(ctx, o, "d-a", false); err != nil {
		t.Fatal(err)
	}
	for _, r := range rec.Requests() {
		if strings.Contains(r, delivery.IdentitySecret) || strings.HasPrefix(r, "PATCH") || strings.Contains(r, "watch") {
			t.Fatalf("the rbac user sent %s", r)
		}
	}
	// The API server's own record agrees: the rotation never read the
	// identity Secret and never watched (before this test's own probe).
	reads, err := cp.Reads(func(e testcluster.AuditEvent) bool {
		return e.User.Username == "rotator-rbac" && (e.ObjectRef.Name == delivery.IdentitySecret || e.Verb == "watch")
	})
	if err != nil || len(reads) != 0 {
		t.Fatalf("audit log: the rbac user read the identity Secret or watched: %+v %v", reads, err)
	}
	if all, _ := cp.Reads(func(e testcluster.AuditEvent) bool { return e.User.Username == "rotator-rbac" }); len(all) == 0 {
		t.Fatal("audit log holds no read by the rbac user at all: the check above proves nothing")
	}
	if _, err := cs.CoreV1().Secrets(ns).Get(ctx, delivery.IdentitySecret, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	ucs, _ := kubernetes.NewForConfig(cfg)
	if _, err := ucs.CoreV1().Secrets(ns).Get(ctx, delivery.IdentitySecret, metav1.GetOptions{}); err == nil {
		t.Fatal("the rbac user can read the identity Secret")
	}
	for _, w := range writes(t, "rotator-rbac", ns) {
		if strings.Contains(w, "patch") || strings.Contains(w, delivery.IdentitySecret) {
			t.Fatalf("write %s", w)
		}
	}
	// Without the Deployment update permission, nothing is written at all.
	short := []any{objs[0].(*rbacv1.Role).DeepCopy()}
	revokeRole()
	if n := testcluster.DropVerb(short, "update", func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "deployments") }); n != 1 {
		t.Fatalf("%d rules of the printed Role grant update on deployments, want 1", n)
	}
	cp.GrantAll(t, short)
	// A new command: a new review (a review caches what it was answered).
	cfg2, err := cp.UserConfig("rotator-rbac")
	if err != nil {
		t.Fatal(err)
	}
	o = options(t, cfg2, ns, stageNS)
	c := newDelivery(t, ns, "d-c", "cred-c", ptr("cred-b"), 3)
	if _, err := Stage(ctx, o, c, token("C")); err != nil {
		t.Fatal(err)
	}
	n := len(writes(t, "rotator-rbac", ns))
	if _, err := Publish(ctx, o, c); !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "update deployments.apps") {
		t.Fatalf("publish without Deployment update: %v", err)
	}
	if w := writes(t, "rotator-rbac", ns); len(w) != n {
		t.Fatalf("wrote without the Deployment permission: %v", w[n:])
	}
}
