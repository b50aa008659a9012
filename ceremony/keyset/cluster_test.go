package keyset

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/keyset/jwkset"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/faults"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
)

// The publish claims are proven against a real kube-apiserver + etcd, its
// RBAC authorizer and its audit log; Decide's table test covers each rule.
var cp *testcluster.ControlPlane

func TestMain(m *testing.M) { testcluster.Main(m, testcluster.Options{AuditLog: true}, &cp) }

func publisher(t *testing.T, cfg *rest.Config, ns string) Options {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return Options{Namespace: ns, Secrets: cs.CoreV1().Secrets(ns), Review: access.NewReview(access.NewReviewer(cs)),
		Hint: "`kubectl ql3 keyset rbac` prints the least privilege", Say: t.Logf}
}

func publish(t *testing.T, o Options, next *jwkset.Keyset, mods ...func(*Request)) (*Result, error) {
	t.Helper()
	r := Request{Next: next}
	for _, m := range mods {
		m(&r)
	}
	return Publish(context.Background(), o, r)
}

func confirmed(r *Request) { r.ConfirmOverlapObserved = true }

func previous(k *jwkset.Keyset) func(*Request) { return func(r *Request) { r.Previous = k } }

func mustPublish(t *testing.T, o Options, next *jwkset.Keyset, mods ...func(*Request)) *Result {
	t.Helper()
	res, err := publish(t, o, next, mods...)
	if err != nil {
		t.Fatalf("publish generation %d: %v", next.Generation, err)
	}
	return res
}

// onCluster is what the namespace holds: the ledger's highest generation
// and the keyset Secret's generation and digest (0, "" when absent).
func onCluster(t *testing.T, ns string) (ledger jwkset.LedgerEntry, kgen int64, kdigest string) {
	t.Helper()
	c := cp.Clientset().CoreV1().Secrets(ns)
	ctx := context.Background()
	if s, err := c.Get(ctx, LedgerSecret, metav1.GetOptions{}); err == nil {
		l, err := ParseLedgerSecret(s)
		if err != nil {
			t.Fatal(err)
		}
		ledger = l.Highest()
	}
	if s, err := c.Get(ctx, KeysetSecret, metav1.GetOptions{}); err == nil {
		k, _, err := ParseKeysetSecret(s)
		if err != nil {
			t.Fatal(err)
		}
		kgen, kdigest = k.Generation, digest(t, k)
	}
	return
}

func digest(t *testing.T, k *jwkset.Keyset) string {
	t.Helper()
	d, err := k.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The rotation of docs/keyset.md end to end: first publish creates both
// Secrets, the overlap updates both, the revoking generation needs
// --confirm-overlap-observed (refused without it, before any write), a
// rerun changes nothing.
func TestPublishRotation(t *testing.T) {
	ns := cp.Namespace(t)
	o := publisher(t, cp.User(t, "rotator", "system:masters"), ns)
	g1, g2, g3 := gen(t, 1, []string{"a"}), gen(t, 2, []string{"a", "b"}), gen(t, 3, []string{"b"}, "a")
	if res := mustPublish(t, o, g1); res.Ledger.Action != Created || res.Keyset.Action != Created {
		t.Fatalf("first publish: %+v", res)
	}
	if res := mustPublish(t, o, g2, previous(g1)); res.Ledger.Action != Updated || res.Keyset.Action != Updated || len(res.NewlyRevoked) != 0 {
		t.Fatalf("overlap: %+v", res)
	}
	before := len(cp.WriteVerbs(t, "rotator", ns, "secrets"))
	if _, err := publish(t, o, g3); !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "--confirm-overlap-observed") {
		t.Fatalf("revoking without confirmation: %v, want invalid naming --confirm-overlap-observed", err)
	}
	for _, v := range cp.WriteVerbs(t, "rotator", ns, "secrets")[before:] {
		if v != "get" {
			t.Fatalf("the refused revocation sent a %s", v)
		}
	}
	res := mustPublish(t, o, g3, confirmed)
	if !slices.Equal(res.NewlyRevoked, []string{"a"}) || res.LedgerGenerations != 3 {
		t.Fatalf("revoking: %+v", res)
	}
	if l, kg, kd := onCluster(t, ns); l.Generation != 3 || kg != 3 || kd != digest(t, g3) {
		t.Fatalf("after the rotation: ledger %+v, keyset %d %s", l, kg, kd)
	}
	if res := mustPublish(t, o, g3, confirmed); res.Ledger.Action != Unchanged || res.Keyset.Action != Unchanged {
		t.Fatalf("rerun: %+v, want nothing written", res)
	}
	for _, v := range cp.WriteVerbs(t, "rotator", ns, "secrets") {
		if v != "get" && v != "create" && v != "update" {
			t.Fatalf("publish sent a %s: only get, create and update are used", v)
		}
	}
}

// Every refusal is judged against the ledger before any write — even with
// the keyset Secret gone, the ledger being the only memory left.
func TestRefusedBeforeAnyWrite(t *testing.T) {
	g1, g2, g3 := gen(t, 1, []string{"a"}), gen(t, 2, []string{"a", "b"}), gen(t, 3, []string{"b"}, "a")
	revived := gen(t, 4, []string{"b", "a2"}, "a") // "a2" holds the key revoked as "a" (gen seeds by the first byte)
	revivedErr := `key "a2" of generation 4 is the key revoked as "a" in generation 3 (RFC 7638 thumbprint ` + key("a", 'a').Thumbprint() + ")"
	tests := []struct {
		name    string
		setup   func(t *testing.T, ns string)
		next    *jwkset.Keyset
		class   fail.Class
		wantErr string
	}{
		{"rollback", nil, g2, fail.Conflict, "below the ledger's highest generation 3"},
		{"rollback with the keyset Secret deleted", func(t *testing.T, ns string) {
			if err := cp.Clientset().CoreV1().Secrets(ns).Delete(context.Background(), KeysetSecret, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, g1, fail.Conflict, "a keyset never goes back"},
		{"rewrite", nil, gen(t, 3, []string{"b", "c"}, "a"), fail.Conflict, "generation 3 is already published"},
		{"implicit key removal", nil, gen(t, 4, []string{"c"}, "a"), fail.Conflict, `active key "b" of generation 3 is missing`},
		{"revocation un-appended", nil, gen(t, 4, []string{"b"}), fail.Conflict, "revocations only append"},
		{"keyset Secret edited outside the ledger", func(t *testing.T, ns string) {
			setKeyset(t, ns, gen(t, 9, []string{"z"}))
		}, gen(t, 4, []string{"b", "c"}, "a"), fail.Tamper, "which the ledger does not record"},
		{"revoked key under a new kid", nil, revived, fail.Conflict, revivedErr},
		{"revoked key under a new kid, keyset Secret deleted", func(t *testing.T, ns string) {
			if err := cp.Clientset().CoreV1().Secrets(ns).Delete(context.Background(), KeysetSecret, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, revived, fail.Conflict, revivedErr},
		{"revoked key under a new kid, keyset Secret reverted to generation 2", func(t *testing.T, ns string) { setKeyset(t, ns, g2) }, revived, fail.Conflict, revivedErr},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := cp.Namespace(t)
			admin := publisher(t, cp.RESTConfig(), ns)
			mustPublish(t, admin, g1)
			mustPublish(t, admin, g2)
			mustPublish(t, admin, g3, confirmed)
			if tt.setup != nil {
				tt.setup(t, ns)
			}
			before, _, _ := onCluster(t, ns)
			name := fmt.Sprintf("refused-%d", i)
			_, err := publish(t, publisher(t, cp.User(t, name, "system:masters"), ns), tt.next, confirmed)
			if !fail.Is(err, tt.class) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("publish: %v, want %v containing %q", err, tt.class, tt.wantErr)
			}
			cp.NoWrites(t, name, ns, "secrets")
			if after, _, _ := onCluster(t, ns); after != before {
				t.Fatalf("the ledger moved from %+v to %+v", before, after)
			}
		})
	}
}

// Publishers racing from the same published generation with different
// generations 2: exactly one wins, every other is a conflict, and both
// Secrets hold the winner's generation.
func TestConcurrentPublishers(t *testing.T) {
	ns := cp.Namespace(t)
	g1 := gen(t, 1, []string{"a"})
	mustPublish(t, publisher(t, cp.RESTConfig(), ns), g1)
	const n = 6
	cands := make([]*jwkset.Keyset, n)
	errs := make([]error, n)
	for i := range n {
		cands[i] = gen(t, 2, []string{"a", string(rune('b' + i))})
	}
	opts := make([]Options, n)
	for i := range n {
		opts[i] = publisher(t, cp.User(t, fmt.Sprintf("racer-%d", i), "system:masters"), ns)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = Publish(context.Background(), opts[i], Request{Next: cands[i]})
		}()
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		t.Logf("publisher %d: %v", i, err)
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
	l, kg, kd := onCluster(t, ns)
	if want := digest(t, cands[winner]); l.Digest != want || kg != 2 || kd != want {
		t.Fatalf("cluster holds ledger %+v, keyset %d %s; the winner %d published %s", l, kg, kd, winner, want)
	}
}

// secretWrite matches a write of the Secret whose data key is dataKey
// (the ledger's ledger.json, the keyset's keyset.json).
func secretWrite(method, ns, dataKey string) faults.Match {
	return faults.Write(method, "/namespaces/"+ns+"/secrets", dataKey)
}

// An answer lost after the server wrote, at each of the four writes, is
// settled by reading: the publish succeeds, saying so.
func TestLostResponseSettled(t *testing.T) {
	for _, tt := range []struct {
		name    string
		first   bool // the publish that loses its answer is the first
		method  string
		dataKey string
	}{
		{"ledger create", true, http.MethodPost, LedgerKey},
		{"keyset create", true, http.MethodPost, KeysetKey},
		{"ledger update", false, http.MethodPut, LedgerKey},
		{"keyset update", false, http.MethodPut, KeysetKey},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ns := cp.Namespace(t)
			g1, g2 := gen(t, 1, []string{"a"}), gen(t, 2, []string{"a", "b"})
			next := g1
			if !tt.first {
				mustPublish(t, publisher(t, cp.RESTConfig(), ns), g1)
				next = g2
			}
			cfg := cp.User(t, "lossy", "system:masters")
			f := faults.Drop(cfg, secretWrite(tt.method, ns, tt.dataKey))
			res := mustPublish(t, publisher(t, cfg, ns), next)
			if f.Fired() != 1 {
				t.Fatalf("the fault fired %d times", f.Fired())
			}
			settled := res.Keyset.Settled
			if tt.dataKey == LedgerKey {
				settled = res.Ledger.Settled
			}
			if !settled {
				t.Fatalf("result %+v does not say the write was settled by reading", res)
			}
			if l, kg, _ := onCluster(t, ns); l.Generation != next.Generation || kg != next.Generation {
				t.Fatalf("cluster holds ledger %+v, keyset %d", l, kg)
			}
		})
	}
}

// refuse fails every request match selects without sending it: the
// publisher stops between its two writes as if it had crashed.
type refuse struct {
	next  http.RoundTripper
	match func(*http.Request) bool
}

func (r refuse) RoundTrip(req *http.Request) (*http.Response, error) {
	if r.match(req) {
		return nil, errors.New("injected: connection refused before the keyset write was sent")
	}
	return r.next.RoundTrip(req)
}

// A publish that stops after the ledger write and before the keyset write
// leaves the ledger ahead; the ledger then refuses any other generation of
// that number, and rerunning the same command converges.
func TestCrashBetweenWritesConverges(t *testing.T) {
	ns := cp.Namespace(t)
	g1, g2 := gen(t, 1, []string{"a"}), gen(t, 2, []string{"a", "b"})
	mustPublish(t, publisher(t, cp.RESTConfig(), ns), g1)
	cfg := cp.User(t, "crashing", "system:masters")
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return refuse{rt, func(r *http.Request) bool {
			return r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/secrets/"+KeysetSecret)
		}}
	})
	_, err := publish(t, publisher(t, cfg, ns), g2, previous(g1))
	if !fail.Is(err, fail.Unavailable) || !strings.Contains(err.Error(), "rerun the same command to converge") {
		t.Fatalf("publish with the keyset write failing: %v, want unavailable, rerun", err)
	}
	if l, kg, _ := onCluster(t, ns); l.Generation != 2 || kg != 1 {
		t.Fatalf("after the crash: ledger %+v, keyset %d; want ledger 2, keyset 1", l, kg)
	}
	other := publisher(t, cp.User(t, "other", "system:masters"), ns)
	if _, err := publish(t, other, gen(t, 2, []string{"a", "c"})); !fail.Is(err, fail.Conflict) {
		t.Fatalf("another generation 2 after the crash: %v, want conflict", err)
	}
	cp.NoWrites(t, "other", ns, "secrets")
	res := mustPublish(t, publisher(t, cp.User(t, "rerun", "system:masters"), ns), g2, previous(g1))
	if res.Ledger.Action != Unchanged || res.Keyset.Action != Updated || !res.Converged {
		t.Fatalf("rerun: %+v, want the ledger unchanged and the keyset converged", res)
	}
	if l, kg, kd := onCluster(t, ns); l.Generation != 2 || kg != 2 || kd != digest(t, g2) {
		t.Fatalf("after the rerun: ledger %+v, keyset %d %s", l, kg, kd)
	}
}

// grant binds user to the publisher Role of RBAC, minus the verb drop.
func grant(t *testing.T, ns, user, drop string) {
	t.Helper()
	cp.Grant(t, RBAC(ns, Subject{User: user}), drop)
}

// The printed least privilege (Secrets get/update by name, create) is
// enough for the first publish and the next; without any one of its verbs
// the publish fails closed, listing what is missing, before any write.
func TestLeastPrivilege(t *testing.T) {
	g1, g2 := gen(t, 1, []string{"a"}), gen(t, 2, []string{"a", "b"})
	t.Run("granted", func(t *testing.T) {
		ns := cp.Namespace(t)
		grant(t, ns, "least", "")
		o := publisher(t, cp.User(t, "least"), ns)
		if err := access.Require(context.Background(), o.Review, Needs(ns), "x"); err != nil {
			t.Fatalf("the printed Role does not grant Needs: %v", err)
		}
		mustPublish(t, o, g1)
		mustPublish(t, o, g2)
		if l, kg, _ := onCluster(t, ns); l.Generation != 2 || kg != 2 {
			t.Fatalf("cluster holds ledger %+v, keyset %d", l, kg)
		}
	})
	cp.FailsClosedLessOne(t, []testcluster.LessOne{
		{Verb: "get", Missing: "get secrets/" + KeysetSecret},
		{Verb: "create", Missing: "create secrets in namespace"},
		{Verb: "update", Missing: "update secrets/" + LedgerSecret, Existing: true},
	}, grant, func(t *testing.T, ns, user string, row testcluster.LessOne) error {
		next := g1
		if row.Existing {
			mustPublish(t, publisher(t, cp.RESTConfig(), ns), g1)
			next = g2
		}
		_, err := publish(t, publisher(t, cp.User(t, user), ns), next)
		return err
	})
}

// setKeyset rewrites the keyset Secret's keyset.json to k, as someone
// holding update on Secrets could.
func setKeyset(t *testing.T, ns string, k *jwkset.Keyset) {
	t.Helper()
	c := cp.Clientset().CoreV1().Secrets(ns)
	s, err := c.Get(context.Background(), KeysetSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Data[KeysetKey], err = k.Encode(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
