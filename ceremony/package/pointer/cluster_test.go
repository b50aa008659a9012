package pointer

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/package/intent"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/faults"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// The pointer's CAS claims are proven against a real kube-apiserver + etcd,
// its RBAC authorizer and its audit log.
var cp *testcluster.ControlPlane

func TestMain(m *testing.M) { testcluster.Main(m, testcluster.Options{AuditLog: true}, &cp) }

// stage is a stage evidence port that vouches for every intent's own
// fields, until drift is set: then it reads another bundle.
type stage struct{ drift atomic.Bool }

func (s *stage) Verify(in intent.Intent) (intent.StageEvidence, error) {
	ev := in.Evidence()
	if s.drift.Load() {
		ev.ContentDigest = canon.DigestBytes("test", []byte("another bundle"))
	}
	return ev, nil
}

// publisher is Options for user cfg on namespace ns, recording requests.
func publisher(t *testing.T, cfg *rest.Config, ns string, v intent.StageVerifier) (Options, *faults.Recorder) {
	t.Helper()
	rec := &faults.Recorder{}
	cfg.Wrap(rec.Wrap)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return Options{ConfigMaps: cs.CoreV1().ConfigMaps(ns), Namespaces: cs.CoreV1().Namespaces(), Review: access.NewReview(access.NewReviewer(cs)),
		Verifier: v, Hint: "`kubectl ql3 package rbac` prints the least privilege", Settle: "`kubectl ql3 package inspect`", Say: t.Logf}, rec
}

// lock is the digest of a named lock (computed, never typed).
func lock(name string) string { return canon.DigestBytes("test-lock", []byte(name)) }

// mk is the intent activating lock(name) as generation gen after prev
// ("" for none) in ns.
func mk(t *testing.T, ns string, gen int64, name, prev string) intent.Intent {
	t.Helper()
	in := intent.Intent{
		Schema: intent.Schema, ClusterIdentity: canon.ClusterIdentity(cp.KubeSystemUID(t)), Namespace: ns, ProjectID: "demo", PackageID: "weather-tools",
		Generation: gen, LockDigest: lock(name),
		StageReference:        "registry.example.com/qinglong/packages/demo@" + canon.DigestBytes("test-manifest", []byte(name)),
		StageReceiptDigest:    canon.DigestBytes("test-receipt", []byte(name)),
		AdapterEvidenceDigest: canon.DigestBytes("test-config", []byte(name)),
		ContentDigest:         canon.DigestBytes("test-bundle", []byte(name)),
	}
	if prev != "" {
		p := lock(prev)
		in.PreviousLockDigest = &p
	}
	n, err := intent.Normalize(in)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// onCluster is the pointer as the admin reads it (nil when absent).
func onCluster(t *testing.T, in intent.Intent) *corev1.ConfigMap {
	t.Helper()
	nm, _ := intent.NamingOf(in)
	cm, err := cp.Clientset().CoreV1().ConfigMaps(in.Namespace).Get(context.Background(), nm.Name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return cm
}

// writes lists the verbs of the writes user sent for ConfigMaps in ns.
func writes(t *testing.T, name, ns string) []string {
	t.Helper()
	var out []string
	for _, e := range cp.WritesBy(t, name, ns) {
		if e.ObjectRef.Resource != "configmaps" || e.Verb == "patch" {
			t.Fatalf("%s sent %s %s", name, e.Verb, e.ObjectRef.Resource)
		}
		out = append(out, e.Verb)
	}
	return out
}

func mustActivate(t *testing.T, o Options, in intent.Intent, want Action) *Result {
	t.Helper()
	res, err := Activate(context.Background(), o, in)
	if err != nil {
		t.Fatalf("activate %s: %v", in, err)
	}
	if res.Action != want || !Same(res.Active.Intent, in) || res.Evidence != in.Evidence() {
		t.Fatalf("activate %s: %+v, want %s", in, res, want)
	}
	return res
}

// Canonical create + inspect + exact replay; the exact-previous upgrade;
// a stale writer, a repeated first activation and a missing pointer
// refused before any write; no patch, list or watch.
func TestActivateLifecycle(t *testing.T) {
	ns := cp.Namespace(t)
	o, rec := publisher(t, cp.User(t, "pub", "system:masters"), ns, &stage{})
	ctx := context.Background()
	g1, g2, g2b, g3 := mk(t, ns, 1, "a", ""), mk(t, ns, 2, "b", "a"), mk(t, ns, 2, "c", "a"), mk(t, ns, 3, "d", "b")

	st, err := Inspect(ctx, o, g1)
	if err != nil || st.State != StateNotActivated {
		t.Fatalf("inspect before: %+v, %v", st, err)
	}
	if st, err := Inspect(ctx, o, g2); !fail.Is(err, fail.Conflict) || st.State != StateConflict {
		t.Fatalf("inspect of generation 2 without a pointer: %+v, %v", st, err)
	}
	if _, err := Activate(ctx, o, g2); !fail.Is(err, fail.Conflict) {
		t.Fatalf("generation 2 without a pointer: %v", err)
	}
	if w := writes(t, "pub", ns); len(w) != 0 {
		t.Fatalf("writes before the first activation: %v", w)
	}

	r1 := mustActivate(t, o, g1, Created)
	cm := onCluster(t, g1)
	want, _, _ := ConfigMapFor(g1, mustTime(t, r1.Active.Receipt.ActivatedAt))
	if cm == nil || !Holds(cm, g1) || cm.Data[intent.ActiveKey] != want.Data[intent.ActiveKey] || cm.ResourceVersion != r1.Pointer.ResourceVersion {
		t.Fatalf("pointer after create: %+v", cm)
	}
	st, err = Inspect(ctx, o, g1)
	if err != nil || st.State != StateActive || st.Active.Receipt != r1.Active.Receipt {
		t.Fatalf("inspect after create: %+v, %v", st, err)
	}
	mustActivate(t, o, g1, Replayed)
	if got := onCluster(t, g1).ResourceVersion; got != r1.Pointer.ResourceVersion {
		t.Fatal("a replay moved the pointer")
	}
	if !slices.Equal(writes(t, "pub", ns), []string{"create"}) {
		t.Fatalf("writes: %v", writes(t, "pub", ns))
	}

	mustActivate(t, o, g2, Updated)
	// g2b replaces the same previous lock: stale now; g1 again: not first.
	for _, in := range []intent.Intent{g2b, g1} {
		if _, err := Activate(ctx, o, in); !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), "nothing was written") {
			t.Fatalf("stale %s: %v", in, err)
		}
		if st, err := Inspect(ctx, o, in); !fail.Is(err, fail.Conflict) || st.State != StateConflict || st.Active.Intent.Generation != 2 {
			t.Fatalf("inspect stale %s: %+v %v", in, st, err)
		}
	}
	mustActivate(t, o, g3, Updated)
	if !slices.Equal(writes(t, "pub", ns), []string{"create", "update", "update"}) {
		t.Fatalf("writes: %v", writes(t, "pub", ns))
	}
	rec.ByName(t, "configmaps", "namespaces")
}

// A lost create answer is unavailable at once (no guess, no second
// create); inspect settles it; activate then replays.
func TestLostCreateSettledByInspect(t *testing.T) {
	ns := cp.Namespace(t)
	cfg := cp.User(t, "lost", "system:masters")
	drop := faults.Drop(cfg, faults.Write(http.MethodPost, "/namespaces/"+ns+"/configmaps"))
	o, rec := publisher(t, cfg, ns, &stage{})
	g1 := mk(t, ns, 1, "a", "")
	_, err := Activate(context.Background(), o, g1)
	if !fail.Is(err, fail.Unavailable) || !strings.Contains(err.Error(), "package inspect") || drop.Fired() != 1 {
		t.Fatalf("lost create: %v (fired %d)", err, drop.Fired())
	}
	st, err := Inspect(context.Background(), o, g1)
	if err != nil || st.State != StateActive {
		t.Fatalf("inspect settles: %+v, %v", st, err)
	}
	mustActivate(t, o, g1, Replayed)
	if w := writes(t, "lost", ns); !slices.Equal(w, []string{"create"}) {
		t.Fatalf("writes %v: want exactly one create", w)
	}
	rec.ByName(t, "configmaps", "namespaces")
}

// Two candidates read the same resourceVersion: exactly one wins, the
// other's update is refused (409) and settled as a conflict.
func TestSameResourceVersionOneWinner(t *testing.T) {
	ns := cp.Namespace(t)
	admin, _ := publisher(t, cp.User(t, "admin", "system:masters"), ns, &stage{})
	mustActivate(t, admin, mk(t, ns, 1, "a", ""), Created)
	var ready sync.WaitGroup
	ready.Add(2)
	gate := make(chan struct{})
	errs := make([]error, 2)
	var done sync.WaitGroup
	for i, name := range []string{"b", "c"} {
		o, _ := publisher(t, cp.User(t, "cand-"+name, "system:masters"), ns, &stage{})
		o.beforeWrite = func() { ready.Done(); <-gate }
		done.Add(1)
		go func() {
			defer done.Done()
			_, errs[i] = Activate(context.Background(), o, mk(t, ns, 2, name, "a"))
		}()
	}
	ready.Wait()
	close(gate)
	done.Wait()
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case !fail.Is(err, fail.Conflict):
			t.Fatalf("loser: %v, want conflict", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d winners: %v", wins, errs)
	}
}

// A winner inserted between the stale writer's read and its write is
// never overwritten: the write carries the read's resourceVersion.
func TestWinnerBetweenReadAndWrite(t *testing.T) {
	ns := cp.Namespace(t)
	admin, _ := publisher(t, cp.User(t, "admin", "system:masters"), ns, &stage{})
	mustActivate(t, admin, mk(t, ns, 1, "a", ""), Created)
	winner := mk(t, ns, 2, "w", "a")
	o, _ := publisher(t, cp.User(t, "stale", "system:masters"), ns, &stage{})
	o.beforeWrite = func() { mustActivate(t, admin, winner, Updated) }
	if _, err := Activate(context.Background(), o, mk(t, ns, 2, "s", "a")); !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), "another writer won") {
		t.Fatalf("stale writer: %v", err)
	}
	if !Holds(onCluster(t, winner), winner) {
		t.Fatal("the winner was overwritten")
	}
	if w := writes(t, "stale", ns); !slices.Equal(w, []string{"update"}) {
		t.Fatalf("stale writes %v", w)
	}
}

// Stage evidence drift fails before any API mutation, and inspect and
// the post-write check see it too.
func TestEvidenceDriftBeforeMutation(t *testing.T) {
	ns := cp.Namespace(t)
	s := &stage{}
	o, _ := publisher(t, cp.User(t, "drift", "system:masters"), ns, s)
	g1 := mk(t, ns, 1, "a", "")
	s.drift.Store(true)
	if _, err := Activate(context.Background(), o, g1); !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), "contentDigest") {
		t.Fatalf("drift: %v", err)
	}
	if w := writes(t, "drift", ns); len(w) != 0 || onCluster(t, g1) != nil {
		t.Fatalf("a write happened: %v", w)
	}
	s.drift.Store(false)
	mustActivate(t, o, g1, Created)
	s.drift.Store(true)
	if _, err := Inspect(context.Background(), o, g1); !fail.Is(err, fail.Conflict) {
		t.Fatalf("inspect with drift: %v", err)
	}
}

// Every tamper class fails closed (5) on activate and inspect and leaves
// the ConfigMap untouched.
func TestTamperFailsClosed(t *testing.T) {
	ns := cp.Namespace(t)
	o, _ := publisher(t, cp.User(t, "tamper", "system:masters"), ns, &stage{})
	admin := cp.Clientset().CoreV1().ConfigMaps(ns)
	ctx := context.Background()
	g1 := mk(t, ns, 1, "a", "")
	nm, _ := intent.NamingOf(g1)
	yes := true
	other := mk(t, ns, 1, "z", "")
	other.PackageID = "other-tools" // another target: its name differs
	otherCM, _, _ := ConfigMapFor(other, mustTime(t, "2026-07-24T01:30:00Z"))
	otherNS := mk(t, "elsewhere", 1, "a", "")
	otherNSCM, _, _ := ConfigMapFor(otherNS, mustTime(t, "2026-07-24T01:30:00Z"))
	for _, tc := range []struct {
		name string
		edit func(cm *corev1.ConfigMap)
	}{
		{"binaryData", func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"x": {1}} }},
		{"finalizer", func(cm *corev1.ConfigMap) { cm.Finalizers = []string{"example.com/hold"} }},
		{"owner reference", func(cm *corev1.ConfigMap) {
			cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Namespace", Name: ns, UID: "1"}}
		}},
		{"extra key", func(cm *corev1.ConfigMap) { cm.Data["run.sh"] = "echo" }},
		{"extra label", func(cm *corev1.ConfigMap) { cm.Labels["x"] = "y" }},
		{"label drift", func(cm *corev1.ConfigMap) { cm.Labels[intent.TargetLabel] = strings.Repeat("a", 52) }},
		{"missing label", func(cm *corev1.ConfigMap) { delete(cm.Labels, LabelSchema) }},
		{"extra annotation", func(cm *corev1.ConfigMap) { cm.Annotations["x"] = "y" }},
		{"annotation drift", func(cm *corev1.ConfigMap) { cm.Annotations[intent.IntentDigestAnnotation] = lock("x") }},
		{"immutable false", func(cm *corev1.ConfigMap) { f := false; cm.Immutable = &f }},
		{"re-indented", func(cm *corev1.ConfigMap) { cm.Data[intent.ActiveKey] += " " }},
		{"another target's pointer under this name", func(cm *corev1.ConfigMap) { cm.Data, cm.Annotations = otherCM.Data, otherCM.Annotations }},
		{"another namespace's pointer", func(cm *corev1.ConfigMap) {
			cm.Data, cm.Annotations, cm.Labels = otherNSCM.Data, otherNSCM.Annotations, otherNSCM.Labels
		}},
		{"deletion pending", func(cm *corev1.ConfigMap) { cm.Finalizers = []string{"example.com/hold"} }},
		{"immutable", func(cm *corev1.ConfigMap) { cm.Immutable = &yes }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_ = admin.Delete(ctx, nm.Name, metav1.DeleteOptions{})
			fresh, _, _ := ConfigMapFor(g1, mustTime(t, "2026-07-24T01:30:00Z"))
			cm, err := admin.Create(ctx, fresh, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(cm)
			if cm, err = admin.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			if tc.name == "deletion pending" {
				if err := admin.Delete(ctx, nm.Name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				if cm, err = admin.Get(ctx, nm.Name, metav1.GetOptions{}); err != nil || cm.DeletionTimestamp == nil {
					t.Fatalf("not pending deletion: %v", err)
				}
			}
			before := cm.ResourceVersion
			for _, in := range []intent.Intent{g1, mk(t, ns, 2, "b", "a")} {
				if _, err := Activate(ctx, o, in); !fail.Is(err, fail.Tamper) {
					t.Errorf("activate %s: %v, want tamper", in, err)
				}
				if _, err := Inspect(ctx, o, in); !fail.Is(err, fail.Tamper) {
					t.Errorf("inspect %s: %v, want tamper", in, err)
				}
			}
			after, err := admin.Get(ctx, nm.Name, metav1.GetOptions{})
			if err != nil || after.ResourceVersion != before {
				t.Fatalf("the tampered pointer was touched: %v", err)
			}
			if len(after.Finalizers) > 0 {
				after.Finalizers = nil
				_, _ = admin.Update(ctx, after, metav1.UpdateOptions{})
			}
		})
	}
	if w := writes(t, "tamper", ns); len(w) != 0 {
		t.Fatalf("writes on tampered pointers: %v", w)
	}
}

// 8 racing publishers, each its own user, two generations: exactly one
// winner per generation, and publishers whose answer is lost settle by
// inspect (active if theirs landed, conflict otherwise).
func TestRaceOneWinnerPerGeneration(t *testing.T) {
	ns := cp.Namespace(t)
	const n = 8
	prev := ""
	for gen := int64(1); gen <= 2; gen++ {
		var wg sync.WaitGroup
		type outcome struct {
			in  intent.Intent
			o   Options
			err error
		}
		outs := make([]outcome, n)
		start := make(chan struct{})
		for i := range n {
			cfg := cp.User(t, fmt.Sprintf("racer-%d-%d", gen, i), "system:masters")
			if i%3 == 0 { // every third racer loses the answer to its write
				faults.Drop(cfg, func(r *http.Request, _ []byte) bool {
					return (r.Method == http.MethodPost || r.Method == http.MethodPut) && strings.Contains(r.URL.Path, "/namespaces/"+ns+"/configmaps")
				})
			}
			o, rec := publisher(t, cfg, ns, &stage{})
			t.Cleanup(func() { rec.ByName(t, "configmaps", "namespaces") })
			outs[i] = outcome{in: mk(t, ns, gen, fmt.Sprintf("g%d-r%d", gen, i), prev), o: o}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, outs[i].err = Activate(context.Background(), outs[i].o, outs[i].in)
			}()
		}
		close(start)
		wg.Wait()
		var winners []int
		for i, out := range outs {
			switch {
			case out.err == nil:
				winners = append(winners, i)
			case fail.Is(out.err, fail.Unavailable):
				st, err := Inspect(context.Background(), out.o, out.in)
				switch {
				case err == nil && st.State == StateActive:
					winners = append(winners, i)
				case fail.Is(err, fail.Conflict):
				default:
					t.Fatalf("racer %d: settle by inspect: %+v %v", i, st, err)
				}
			case !fail.Is(out.err, fail.Conflict):
				t.Fatalf("racer %d: %v", i, out.err)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("generation %d: winners %v", gen, winners)
		}
		w := outs[winners[0]].in
		if !Holds(onCluster(t, w), w) {
			t.Fatalf("generation %d: the pointer does not hold the winner", gen)
		}
		prev = fmt.Sprintf("g%d-r%d", gen, winners[0])
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// The printed Role and ClusterRole, bound to a user with no other rights,
// suffice; without get, create or update activate fails closed (invalid)
// before any write.
func TestLeastPrivilege(t *testing.T) {
	ns := cp.Namespace(t)
	ctx := context.Background()
	g1 := mk(t, ns, 1, "a", "")
	full, _ := publisher(t, cp.User(t, "least"), ns, &stage{})
	grantIn(t, ns, g1, "least", "")
	mustActivate(t, full, g1, Created)
	mustActivate(t, full, mk(t, ns, 2, "b", "a"), Updated)
	if st, err := Inspect(ctx, full, mk(t, ns, 2, "b", "a")); err != nil || st.State != StateActive {
		t.Fatalf("inspect: %+v %v", st, err)
	}
	cp.FailsClosedLessOne(t, []testcluster.LessOne{
		{Verb: "create", Missing: "create configmaps in namespace"},
		{Verb: "update", Missing: "update configmaps/" + intent.NamePrefix, Existing: true},
		{Verb: "get", Missing: "get configmaps/" + intent.NamePrefix},
		{Verb: "get-namespace", Missing: "get namespaces/kube-system"},
	}, func(t *testing.T, ns, user, drop string) {
		grantIn(t, ns, mk(t, ns, 1, "a", ""), user, drop)
	}, func(t *testing.T, ns, user string, row testcluster.LessOne) error {
		o, _ := publisher(t, cp.User(t, user), ns, &stage{})
		in := mk(t, ns, 1, "a", "")
		if row.Existing {
			admin, _ := publisher(t, cp.User(t, "admin", "system:masters"), ns, &stage{})
			mustActivate(t, admin, in, Created)
			in = mk(t, ns, 2, "b", "a")
		}
		_, err := Activate(ctx, o, in)
		if err != nil && !strings.Contains(err.Error(), "package rbac") {
			t.Errorf("without %s: %v, want the hint to `kubectl ql3 package rbac`", row.Verb, err)
		}
		return err
	})
}

// grantIn creates the printed roles for in's pointer, bound to user, less
// the verb drop in its ConfigMap rules ("get-namespace": no ClusterRole
// binding).
func grantIn(t *testing.T, ns string, in intent.Intent, user, drop string) {
	t.Helper()
	nm, _ := intent.NamingOf(in)
	objs := RBAC(nm, ns, Subject{User: user})
	switch drop {
	case "":
	case "get-namespace":
		objs = slices.DeleteFunc(objs, func(o any) bool { _, ok := o.(*rbacv1.ClusterRoleBinding); return ok })
	default:
		if testcluster.DropVerb(objs, drop, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "configmaps") }) == 0 {
			t.Fatalf("no ConfigMap rule grants %q: the test would prove nothing", drop)
		}
	}
	cp.GrantAll(t, objs)
}
