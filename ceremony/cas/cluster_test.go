package cas_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/faults"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
)

// The CAS claims are proven here against a real kube-apiserver + etcd; the
// scripted store in write_test.go only drives the decision branches.
var cp *testcluster.ControlPlane

func TestMain(m *testing.M) { testcluster.Main(m, testcluster.Options{AuditLog: true}, &cp) }

func client(t *testing.T, cfg *rest.Config, ns string) cas.Client[*corev1.ConfigMap] {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs.CoreV1().ConfigMaps(ns)
}

func intent(ns, v, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ptr", Namespace: ns, ResourceVersion: rv}, Data: map[string]string{"v": v}}
}

func write(t *testing.T, c cas.Client[*corev1.ConfigMap], desired *corev1.ConfigMap, create bool, p cas.Policy) (cas.Result[*corev1.ConfigMap], error) {
	w := cas.Write[*corev1.ConfigMap]{
		Client: c, What: "configmap " + desired.Namespace + "/ptr", Desired: desired, Create: create,
		FieldManager: "cas-test", Policy: p,
		Landed: func(cur *corev1.ConfigMap) bool { return cur.Data["v"] == desired.Data["v"] },
		Say:    func(f string, a ...any) { t.Logf(f, a...) },
	}
	return w.Do(context.Background())
}

func current(t *testing.T, ns string) *corev1.ConfigMap {
	t.Helper()
	got, err := cp.Clientset().CoreV1().ConfigMaps(ns).Get(context.Background(), "ptr", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// Create of an existing name and update from a stale resourceVersion are
// refused by the API server: an exact replay is success, anything else a
// conflict, and the first writer's value survives.
func TestCreateAndStaleUpdate(t *testing.T) {
	ns := cp.Namespace(t)
	c := client(t, cp.User(t, "alice", "system:masters"), ns)
	if _, err := write(t, c, intent(ns, "a", ""), true, cas.Resend); err != nil {
		t.Fatal(err)
	}
	res, err := write(t, c, intent(ns, "a", ""), true, cas.Resend)
	if err != nil || !res.Settled {
		t.Fatalf("second identical create: %+v %v, want settled exact replay", res, err)
	}
	if _, err := write(t, c, intent(ns, "b", ""), true, cas.Resend); !fail.Is(err, fail.Conflict) {
		t.Fatalf("create over another intent: %v, want conflict", err)
	}
	base := current(t, ns).ResourceVersion
	if _, err := write(t, c, intent(ns, "b", base), false, cas.Resend); err != nil {
		t.Fatal(err)
	}
	if _, err := write(t, c, intent(ns, "c", base), false, cas.Resend); !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), "another writer won") {
		t.Fatalf("stale update: %v, want conflict", err)
	}
	if v := current(t, ns).Data["v"]; v != "b" {
		t.Fatalf("after a stale update the value is %q, want the first writer's b", v)
	}
	// The object removed under an update: conflict, "removed".
	if err := cp.Clientset().CoreV1().ConfigMaps(ns).Delete(context.Background(), "ptr", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := write(t, c, intent(ns, "d", base), false, cas.Resend); !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), "removed") {
		t.Fatalf("update of a removed object: %v, want conflict naming the removal", err)
	}
}

// Writers racing from one read: exactly one wins, each loser is a
// conflict, none overwrote another.
func TestRacingWriters(t *testing.T) {
	ns := cp.Namespace(t)
	admin := client(t, cp.RESTConfig(), ns)
	if _, err := write(t, admin, intent(ns, "base", ""), true, cas.Resend); err != nil {
		t.Fatal(err)
	}
	base := current(t, ns).ResourceVersion
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	clients := make([]cas.Client[*corev1.ConfigMap], n)
	for i := range n { // set up outside the goroutines: t.Fatal belongs to the test's own
		clients[i] = client(t, cp.User(t, fmt.Sprintf("writer-%d", i), "system:masters"), ns)
	}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = write(t, clients[i], intent(ns, fmt.Sprintf("w%d", i), base), false, cas.Resend)
		}()
	}
	wg.Wait()
	winners := 0
	for i, err := range errs {
		switch {
		case err == nil:
			winners++
			if v := current(t, ns).Data["v"]; v != fmt.Sprintf("w%d", i) {
				t.Errorf("writer %d won but the object holds %q", i, v)
			}
		case !fail.Is(err, fail.Conflict):
			t.Errorf("writer %d: %v, want conflict", i, err)
		}
	}
	if winners != 1 {
		t.Fatalf("%d winners, want exactly 1", winners)
	}
}

// An answer that never arrives — lost after the server wrote, or held past
// the client's --request-timeout — is settled by reading: the write is
// found to have landed (never reported as "nothing was written"). With
// NoGuess it is reported unavailable, and the object did land.
func TestUnknownOutcomesSettleByReading(t *testing.T) {
	for _, tt := range []struct {
		name   string
		delay  bool
		create bool
		policy cas.Policy
	}{
		{"lost create", false, true, cas.Resend},
		{"lost update", false, false, cas.Resend},
		{"timed-out create", true, true, cas.Resend},
		{"timed-out update", true, false, cas.SettleOnce},
		{"timed-out update, no guess", true, false, cas.NoGuess},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ns := cp.Namespace(t)
			rv := ""
			if !tt.create {
				if _, err := write(t, client(t, cp.RESTConfig(), ns), intent(ns, "old", ""), true, cas.Resend); err != nil {
					t.Fatal(err)
				}
				rv = current(t, ns).ResourceVersion
			}
			cfg := cp.User(t, "faulty", "system:masters")
			method := http.MethodPut
			if tt.create {
				method = http.MethodPost
			}
			match := faults.Write(method, "/namespaces/"+ns+"/configmaps", "new")
			var f *faults.Fault
			if tt.delay {
				cfg.Timeout = time.Second
				f = faults.Delay(cfg, match, 3*time.Second)
			} else {
				f = faults.Drop(cfg, match)
			}
			res, err := write(t, client(t, cfg, ns), intent(ns, "new", rv), tt.create, tt.policy)
			if f.Fired() != 1 {
				t.Fatalf("the fault fired %d times", f.Fired())
			}
			if v := current(t, ns).Data["v"]; v != "new" {
				t.Fatalf("the server holds %q: the write did not reach it, the test proves nothing", v)
			}
			if tt.policy == cas.NoGuess {
				if !fail.Is(err, fail.Unavailable) || !strings.Contains(err.Error(), "did not arrive") {
					t.Fatalf("no-guess write: %v, want unavailable", err)
				}
				return
			}
			if err != nil || !res.Settled {
				t.Fatalf("write: %+v %v, want settled as landed", res, err)
			}
		})
	}
}

// A delete fenced by UID and resourceVersion removes exactly the recorded
// object: changed → conflict, recreated → left alone, absent → reported,
// a lost answer settled by reading, a finalizer waited for.
func TestFencedDelete(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name    string
		before  func(t *testing.T, ns string) // between record and delete
		drop    bool
		dryRun  bool
		judged  bool // Unchanged judges by data["v"] alone (labels may move)
		want    cas.DeleteOutcome
		class   fail.Class
		remains bool // the object (any UID) still exists afterwards
	}{
		{name: "recorded state", want: cas.Deleted},
		{name: "dry-run", dryRun: true, want: cas.Deleted, remains: true},
		{name: "changed since recorded", before: func(t *testing.T, ns string) {
			cm := current(t, ns)
			cm.Data = map[string]string{"v": "edited"}
			if _, err := cp.Clientset().CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, class: fail.Conflict, remains: true},
		{name: "recreated by someone else", before: func(t *testing.T, ns string) {
			c := cp.Clientset().CoreV1().ConfigMaps(ns)
			if err := c.Delete(ctx, "ptr", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Create(ctx, intent(ns, "theirs", ""), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, want: cas.Recreated, remains: true},
		{name: "already absent", before: func(t *testing.T, ns string) {
			if err := cp.Clientset().CoreV1().ConfigMaps(ns).Delete(ctx, "ptr", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, want: cas.AlreadyAbsent},
		{name: "answer lost", drop: true, want: cas.Deleted},
		// Only what the caller reviewed decides "changed": a move it judges
		// unchanged is deleted, fenced on the resourceVersion read then.
		{name: "moved, judged unchanged", judged: true, before: func(t *testing.T, ns string) {
			cm := current(t, ns)
			cm.Labels = map[string]string{"touched": "by-a-controller"}
			if _, err := cp.Clientset().CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, want: cas.Deleted},
		{name: "moved, judged changed", judged: true, before: func(t *testing.T, ns string) {
			cm := current(t, ns)
			cm.Data = map[string]string{"v": "edited"}
			if _, err := cp.Clientset().CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, class: fail.Conflict, remains: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ns := cp.Namespace(t)
			if _, err := cp.Clientset().CoreV1().ConfigMaps(ns).Create(ctx, intent(ns, "ours", ""), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			rec := current(t, ns)
			if tt.before != nil {
				tt.before(t, ns)
			}
			cfg := cp.User(t, "deleter", "system:masters")
			var f *faults.Fault
			if tt.drop {
				f = faults.Drop(cfg, faults.Write(http.MethodDelete, "/configmaps/ptr"))
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			c := cs.CoreV1().ConfigMaps(ns)
			d := cas.Delete{
				What: "configmap " + ns + "/ptr", UID: string(rec.UID), ResourceVersion: rec.ResourceVersion, DryRun: tt.dryRun,
				Send: func(ctx context.Context, o metav1.DeleteOptions) error { return c.Delete(ctx, "ptr", o) },
				Get:  func(ctx context.Context) (metav1.Object, error) { return c.Get(ctx, "ptr", metav1.GetOptions{}) },
				Say:  func(f string, a ...any) { t.Logf(f, a...) },
			}
			if tt.judged {
				d.Unchanged = func(cur metav1.Object) bool { return cur.(*corev1.ConfigMap).Data["v"] == "ours" }
			}
			got, err := d.Do(ctx)
			if tt.class != 0 {
				if fail.ClassOf(err) != tt.class {
					t.Fatalf("Do: %q %v, want class %v", got, err, tt.class)
				}
			} else if err != nil || got != tt.want {
				t.Fatalf("Do: %q %v, want %q", got, err, tt.want)
			}
			if f != nil && f.Fired() != 1 {
				t.Fatalf("the fault fired %d times", f.Fired())
			}
			_, gerr := cp.Clientset().CoreV1().ConfigMaps(ns).Get(ctx, "ptr", metav1.GetOptions{})
			if exists := gerr == nil; exists != tt.remains {
				t.Fatalf("object exists afterwards: %v (%v), want %v", exists, gerr, tt.remains)
			}
		})
	}

	t.Run("finalizer waited for", func(t *testing.T) {
		ns := cp.Namespace(t)
		c := cp.Clientset().CoreV1().ConfigMaps(ns)
		obj := intent(ns, "ours", "")
		obj.Finalizers = []string{"qinglong.io/test"}
		rec, err := c.Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		get := func(ctx context.Context) (metav1.Object, error) { return c.Get(ctx, "ptr", metav1.GetOptions{}) }
		d := cas.Delete{What: "configmap ptr", UID: string(rec.UID), ResourceVersion: rec.ResourceVersion,
			Send: func(ctx context.Context, o metav1.DeleteOptions) error { return c.Delete(ctx, "ptr", o) }, Get: get}
		if got, err := d.Do(ctx); err != nil || got != cas.Deleted {
			t.Fatalf("Do: %q %v", got, err)
		}
		// A second run (resume) finds it terminating: deleted, not a conflict.
		if got, err := d.Do(ctx); err != nil || got != cas.Deleted {
			t.Fatalf("rerun on a terminating object: %q %v", got, err)
		}
		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if err := cas.WaitGone(short, string(rec.UID), get, 100*time.Millisecond); err == nil {
			t.Fatal("WaitGone returned while the finalizer holds the object")
		}
		cur, _ := c.Get(ctx, "ptr", metav1.GetOptions{})
		cur.Finalizers = nil
		if _, err := c.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cas.WaitGone(ctx, string(rec.UID), get, 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	})
}

// The hardest order: the write reaches the server only after the client
// gave up and read the object to settle it. SettleOnce must then report
// the outcome unknown (never "nothing was written": it does land); Resend
// sends the same CAS again, and whichever of the two lands first is ours.
func TestLateCommit(t *testing.T) {
	for _, tt := range []struct {
		name   string
		policy cas.Policy
	}{{"settle once", cas.SettleOnce}, {"resend", cas.Resend}} {
		t.Run(tt.name, func(t *testing.T) {
			ns := cp.Namespace(t)
			if _, err := write(t, client(t, cp.RESTConfig(), ns), intent(ns, "old", ""), true, cas.Resend); err != nil {
				t.Fatal(err)
			}
			rv := current(t, ns).ResourceVersion
			cfg := cp.User(t, "late", "system:masters")
			cfg.Timeout = time.Second
			f := faults.Late(cfg, faults.Write(http.MethodPut, "/namespaces/"+ns+"/configmaps", "new"), 2*time.Second)
			res, err := write(t, client(t, cfg, ns), intent(ns, "new", rv), false, tt.policy)
			if f.Fired() != 1 {
				t.Fatalf("the fault fired %d times", f.Fired())
			}
			switch tt.policy {
			case cas.SettleOnce:
				if !fail.Is(err, fail.Unavailable) || strings.Contains(err.Error(), "nothing was written") || !strings.Contains(err.Error(), "outcome is unknown") {
					t.Fatalf("late write, settle once: %v, want unavailable with the outcome unknown", err)
				}
			default:
				if err != nil || res.Object.Data["v"] != "new" {
					t.Fatalf("late write, resend: %+v %v", res, err)
				}
			}
			<-f.Landed()
			if v := current(t, ns).Data["v"]; v != "new" || (tt.policy == cas.SettleOnce && f.LateErr != nil) {
				t.Logf("late request: %v", f.LateErr)
				t.Fatalf("after the late write the object holds %q", v)
			}
		})
	}
}

// The read that settles an unanswered write is itself refused by the real
// authorizer (a user whose role lets it write the ConfigMap but not read
// it): the write did land, so the outcome is unknown — unavailable (4)
// naming the object and the refusal, never invalid input (2).
func TestRefusedSettlingRead(t *testing.T) {
	for _, create := range []bool{true, false} {
		t.Run(fmt.Sprintf("create=%v", create), func(t *testing.T) {
			ns := cp.Namespace(t)
			ctx := context.Background()
			admin := cp.Clientset()
			if _, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "write-only"},
				Rules: []rbacv1.PolicyRule{{Verbs: []string{"create", "update"}, APIGroups: []string{""}, Resources: []string{"configmaps"}}}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "write-only"},
				RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "write-only"},
				Subjects: []rbacv1.Subject{{Kind: "User", Name: "write-only", APIGroup: "rbac.authorization.k8s.io"}}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			rv, method := "", http.MethodPost
			if !create {
				if _, err := write(t, client(t, cp.RESTConfig(), ns), intent(ns, "old", ""), true, cas.Resend); err != nil {
					t.Fatal(err)
				}
				rv, method = current(t, ns).ResourceVersion, http.MethodPut
			}
			cfg := cp.User(t, "write-only")
			f := faults.Drop(cfg, faults.Write(method, "/namespaces/"+ns+"/configmaps", "new"))
			_, err := write(t, client(t, cfg, ns), intent(ns, "new", rv), create, cas.Resend)
			if f.Fired() != 1 {
				t.Fatalf("the fault fired %d times", f.Fired())
			}
			if v := current(t, ns).Data["v"]; v != "new" {
				t.Fatalf("the server holds %q: the write did not reach it, the test proves nothing", v)
			}
			if !fail.Is(err, fail.Unavailable) || !strings.Contains(err.Error(), "configmap "+ns+"/ptr") ||
				!strings.Contains(err.Error(), "forbidden") || !strings.Contains(err.Error(), "outcome is unknown") {
				t.Fatalf("write settled by a refused read: %v (class %v), want unavailable naming the object, the refusal and the unknown outcome", err, fail.ClassOf(err))
			}
			gets, err := cp.Reads(func(e testcluster.AuditEvent) bool {
				return e.User.Username == "write-only" && e.Verb == "get" && e.ObjectRef.Namespace == ns && e.ObjectRef.Name == "ptr"
			})
			if err != nil || len(gets) != 1 || gets[0].ResponseStatus.Code != http.StatusForbidden {
				t.Fatalf("the settling read was not refused by the API server (%d gets, %v): the test proves nothing", len(gets), err)
			}
		})
	}
}
