package envbundle

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/envbundle/envcarrier"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/faults"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
)

// The publish claims are proven against a real kube-apiserver + etcd, its
// RBAC authorizer and its audit log.
var cp *testcluster.ControlPlane

func TestMain(m *testing.M) { testcluster.Main(m, testcluster.Options{AuditLog: true}, &cp) }

const bundleName = "task-env"

func publisher(t *testing.T, cfg *rest.Config, ns string) Options {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return Options{Namespace: ns, Name: bundleName, Secrets: cs.CoreV1().Secrets(ns), Review: access.NewReview(access.NewReviewer(cs)),
		Hint: "`kubectl ql3 env-bundle rbac` prints the least privilege", Say: t.Logf}
}

func mustPublish(t *testing.T, o Options, b *envcarrier.Bundle, expected string) *Result {
	t.Helper()
	res, err := Publish(context.Background(), o, b, expected)
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	return res
}

// onCluster is the bundle Secret as the admin reads it (nil when absent).
func onCluster(t *testing.T, ns string) *corev1.Secret {
	t.Helper()
	s, err := cp.Clientset().CoreV1().Secrets(ns).Get(context.Background(), bundleName, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return s
}

// Create, replay, update with the printed version, conflict on a stale or
// missing --expected-version, and inspect: each refusal before any write.
func TestPublishLifecycle(t *testing.T) {
	ns := cp.Namespace(t)
	b1, b2, b3 := bundle(t, canaryValue), bundle(t, canaryValue+"2"), bundle(t, canaryValue+"3")
	o := publisher(t, cp.User(t, "pub", "system:masters"), ns)
	ctx := context.Background()

	st, err := Inspect(ctx, o)
	if err != nil || st.Present || st.ResourceVersion != "" {
		t.Fatalf("inspect before: %+v, %v", st, err)
	}
	if _, err := Publish(ctx, o, b1, "12345"); !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("first publish naming a version: %v, want conflict", err)
	}
	cp.NoWrites(t, "pub", ns, "secrets")

	r1 := mustPublish(t, o, b1, "")
	s := onCluster(t, ns)
	if r1.Action != Created || r1.Settled || s == nil || r1.ResourceVersion != s.ResourceVersion || !Holds(s, b1) {
		t.Fatalf("create: %+v, Secret %v", r1, s)
	}
	if !slices.Equal(cp.WriteVerbs(t, "pub", ns, "secrets"), []string{"create"}) {
		t.Fatalf("requests %v", cp.WriteVerbs(t, "pub", ns, "secrets"))
	}
	st, err = Inspect(ctx, o)
	if err != nil || !st.Present || st.ResourceVersion != r1.ResourceVersion {
		t.Fatalf("inspect after create: %+v, %v", st, err)
	}

	// A replay writes nothing, with or without a (stale) version.
	for _, exp := range []string{"", r1.ResourceVersion, "1"} {
		r := mustPublish(t, o, b1, exp)
		if r.Action != Replayed || r.ResourceVersion != r1.ResourceVersion {
			t.Fatalf("replay with %q: %+v", exp, r)
		}
	}
	if got := onCluster(t, ns).ResourceVersion; got != r1.ResourceVersion {
		t.Fatalf("a replay moved the Secret to %s", got)
	}

	// Another bundle: without --expected-version, or with a wrong one: conflict.
	for _, exp := range []string{"", "1"} {
		if _, err := Publish(ctx, o, b2, exp); !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), "nothing was written") {
			t.Fatalf("publish another bundle with %q: %v, want conflict", exp, err)
		}
	}
	r2 := mustPublish(t, o, b2, r1.ResourceVersion)
	if r2.Action != Updated || r2.ResourceVersion == r1.ResourceVersion || !Holds(onCluster(t, ns), b2) {
		t.Fatalf("update: %+v", r2)
	}
	// The version of the first publish is now stale.
	if _, err := Publish(ctx, o, b3, r1.ResourceVersion); !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), "not the --expected-version "+r1.ResourceVersion) {
		t.Fatalf("stale --expected-version: %v, want conflict", err)
	}
	if !Holds(onCluster(t, ns), b2) {
		t.Fatal("a refused publish changed the Secret")
	}
	if got := cp.WriteVerbs(t, "pub", ns, "secrets"); !slices.Equal(got, []string{"create", "update"}) {
		t.Fatalf("requests %v: only the create and the one update may have written", got)
	}

	// Kept on update: another tool's label; the content's size is nowhere in
	// the metadata.
	admin := cp.Clientset().CoreV1().Secrets(ns)
	cur := onCluster(t, ns)
	cur.Labels["team"] = "payments"
	if cur, err = admin.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r3 := mustPublish(t, o, b3, cur.ResourceVersion)
	after := onCluster(t, ns)
	if r3.Action != Updated || after.Labels["team"] != "payments" || len(after.Annotations) != 0 || !Holds(after, b3) {
		t.Fatalf("update keeping a label: %+v, %v", r3, after.ObjectMeta)
	}

	// A tampered Secret: inspect reports its version and tamper; publish
	// refuses before writing.
	after.Data[Key] = []byte(canaryName + "=" + canaryValue)
	if _, err := admin.Update(ctx, after, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	st, err = Inspect(ctx, o)
	if !fail.Is(err, fail.Tamper) || !st.Present || st.ResourceVersion == "" {
		t.Fatalf("inspect a tampered Secret: %+v, %v", st, err)
	}
	if _, err := Publish(ctx, o, b1, st.ResourceVersion); !fail.Is(err, fail.Tamper) {
		t.Fatalf("publish over a tampered Secret: %v", err)
	}
	noCanary(t, err.Error())
}

// A Secret of the same name that publish did not write is never adopted.
func TestUnmanagedSecretRefused(t *testing.T) {
	ns := cp.Namespace(t)
	ctx := context.Background()
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: bundleName, Namespace: ns}, Data: map[string][]byte{canaryName: []byte(canaryValue)}}
	if _, err := cp.Clientset().CoreV1().Secrets(ns).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	o := publisher(t, cp.User(t, "adopter", "system:masters"), ns)
	st, ierr := Inspect(ctx, o)
	_, perr := Publish(ctx, o, bundle(t, canaryValue), st.ResourceVersion)
	for _, err := range []error{ierr, perr} {
		if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "cannot be adopted") {
			t.Fatalf("unmanaged Secret: %v, want invalid", err)
		}
		noCanary(t, err.Error())
	}
	cp.NoWrites(t, "adopter", ns, "secrets")
}

// Concurrent publishers of different bundles, all creating or all updating
// from the same version: exactly one wins, every other is a conflict.
func TestConcurrentPublishers(t *testing.T) {
	for _, first := range []bool{true, false} {
		t.Run(fmt.Sprintf("first=%v", first), func(t *testing.T) {
			ns := cp.Namespace(t)
			expected := ""
			if !first {
				expected = mustPublish(t, publisher(t, cp.RESTConfig(), ns), bundle(t, "base"), "").ResourceVersion
			}
			const n = 6
			cands := make([]*envcarrier.Bundle, n)
			opts := make([]Options, n)
			errs := make([]error, n)
			for i := range n {
				cands[i] = bundle(t, fmt.Sprintf("%s-%d", canaryValue, i))
				opts[i] = publisher(t, cp.User(t, fmt.Sprintf("racer-%d", i), "system:masters"), ns)
			}
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					_, errs[i] = Publish(context.Background(), opts[i], cands[i], expected)
				}()
			}
			close(start)
			wg.Wait()
			winner := -1
			for i, err := range errs {
				switch {
				case err == nil && winner >= 0:
					t.Fatalf("publishers %d and %d both won", winner, i)
				case err == nil:
					winner = i
				case !fail.Is(err, fail.Conflict):
					t.Errorf("publisher %d: %v, want conflict", i, err)
				}
			}
			if winner < 0 {
				t.Fatalf("no publisher won: %v", errs)
			}
			if !Holds(onCluster(t, ns), cands[winner]) {
				t.Fatalf("the Secret does not hold the winner %d's bundle", winner)
			}
		})
	}
}

// An answer lost after the server wrote (dropped, or held past the
// client's timeout), on the create and on the update, is settled by
// reading: the publish succeeds and says so, the Secret holds the bundle.
func TestLostResponseSettled(t *testing.T) {
	for _, tt := range []struct {
		name   string
		method string
		delay  bool
	}{
		{"create dropped", http.MethodPost, false},
		{"update dropped", http.MethodPut, false},
		{"create past timeout", http.MethodPost, true},
		{"update past timeout", http.MethodPut, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ns := cp.Namespace(t)
			next, expected := bundle(t, canaryValue), ""
			if tt.method == http.MethodPut {
				expected = mustPublish(t, publisher(t, cp.RESTConfig(), ns), bundle(t, "before"), "").ResourceVersion
			}
			cfg := cp.User(t, "lossy", "system:masters")
			match := faults.Write(tt.method, "/namespaces/"+ns+"/secrets", Key)
			var f *faults.Fault
			if tt.delay {
				cfg.Timeout = 2 * time.Second
				f = faults.Delay(cfg, match, 5*time.Second)
			} else {
				f = faults.Drop(cfg, match)
			}
			res := mustPublish(t, publisher(t, cfg, ns), next, expected)
			if f.Fired() != 1 {
				t.Fatalf("the fault fired %d times", f.Fired())
			}
			s := onCluster(t, ns)
			if !res.Settled || !Holds(s, next) || res.ResourceVersion != s.ResourceVersion {
				t.Fatalf("result %+v; the Secret holds the bundle: %v", res, Holds(s, next))
			}
		})
	}
}

// grant binds user to the Role RBAC prints, minus the verb drop.
func grant(t *testing.T, ns, user, drop string) {
	t.Helper()
	objs, err := RBAC(ns, bundleName, Subject{User: user})
	if err != nil {
		t.Fatal(err)
	}
	cp.Grant(t, objs, drop)
}

// The printed least privilege is enough for create, replay, update and
// inspect; without any one of its verbs publish fails closed, listing what
// is missing, before any write.
func TestLeastPrivilege(t *testing.T) {
	b1, b2 := bundle(t, canaryValue), bundle(t, canaryValue+"2")
	t.Run("granted", func(t *testing.T) {
		ns := cp.Namespace(t)
		grant(t, ns, "least", "")
		o := publisher(t, cp.User(t, "least"), ns)
		if err := access.Require(context.Background(), o.Review, Needs(ns, bundleName), "x"); err != nil {
			t.Fatalf("the printed Role does not grant Needs: %v", err)
		}
		r1 := mustPublish(t, o, b1, "")
		mustPublish(t, o, b1, "")
		mustPublish(t, o, b2, r1.ResourceVersion)
		if st, err := Inspect(context.Background(), o); err != nil || !st.Present {
			t.Fatalf("inspect: %+v, %v", st, err)
		}
		if !Holds(onCluster(t, ns), b2) {
			t.Fatal("the Secret does not hold the second bundle")
		}
		for _, v := range cp.WriteVerbs(t, "least", ns, "secrets") {
			if v != "get" && v != "create" && v != "update" {
				t.Fatalf("publish sent a %s", v)
			}
		}
	})
	cp.FailsClosedLessOne(t, []testcluster.LessOne{
		{Verb: "get", Missing: "get secrets/" + bundleName},
		{Verb: "create", Missing: "create secrets in namespace"},
		{Verb: "update", Missing: "update secrets/" + bundleName, Existing: true},
	}, grant, func(t *testing.T, ns, user string, row testcluster.LessOne) error {
		expected := ""
		if row.Existing {
			expected = mustPublish(t, publisher(t, cp.RESTConfig(), ns), b1, "").ResourceVersion
		}
		_, err := Publish(context.Background(), publisher(t, cp.User(t, user), ns), b2, expected)
		return err
	})
}

// A missing namespace is invalid input, and the create is the only write
// tried.
func TestMissingNamespace(t *testing.T) {
	o := publisher(t, cp.RESTConfig(), "no-such-namespace-envb")
	_, err := Publish(context.Background(), o, bundle(t, canaryValue), "")
	if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("publish into a missing namespace: %v", err)
	}
}

// The audit log never holds a name or a value (Metadata level: object
// references, URIs, annotations, user agents; deletes at Request level),
// after a publish, a replay, an update and a refused publish made here —
// whatever other tests of the package ran before.
func TestAuditLogHoldsNoSecret(t *testing.T) {
	ns := cp.Namespace(t)
	o := publisher(t, cp.RESTConfig(), ns)
	first := mustPublish(t, o, bundle(t, canaryValue), "")
	mustPublish(t, o, bundle(t, canaryValue), "")
	second := mustPublish(t, o, bundle(t, canaryValue+"-2"), first.ResourceVersion)
	if _, err := Publish(context.Background(), o, bundle(t, canaryValue+"-3"), first.ResourceVersion); !fail.Is(err, fail.Conflict) {
		t.Fatalf("stale publish: %v, want conflict", err)
	}
	if second.ResourceVersion == first.ResourceVersion {
		t.Fatal("the update did not change the version")
	}
	data, err := os.ReadFile(cp.AuditLogPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) == 0 {
		t.Fatal("empty audit log")
	}
	noCanary(t, string(data))
}
