package cas_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/faults"
)

// swapTo is the Swap of ConfigMap ptr in ns to value v; reviews records
// what the write review was asked (create or update).
func swapTo(t *testing.T, ns, v string, reviews *[]bool) *cas.Swap[*corev1.ConfigMap] {
	return swapThrough(t, cp.User(t, "swapper", "system:masters"), ns, v, reviews)
}

func swapThrough(t *testing.T, cfg *rest.Config, ns, v string, reviews *[]bool) *cas.Swap[*corev1.ConfigMap] {
	holds := func(cur *corev1.ConfigMap) bool { return cur.Data["v"] == v }
	return &cas.Swap[*corev1.ConfigMap]{
		Client: client(t, cfg, ns), Name: "ptr", What: "configmap " + ns + "/ptr",
		FieldManager: "cas-test", Policy: cas.Resend, Say: t.Logf,
		Check: func(cur *corev1.ConfigMap) error {
			if cur.Data["v"] == "tampered" {
				return fail.Errorf(fail.Tamper, "ptr is tampered")
			}
			return nil
		},
		Replay: holds,
		Build: func(_ context.Context, cur *corev1.ConfigMap, present bool) (*corev1.ConfigMap, error) {
			if present && cur.Data["v"] == "frozen" {
				return nil, fail.Errorf(fail.Conflict, "ptr is frozen")
			}
			return intent(ns, v, ""), nil
		},
		Review: func(_ context.Context, create bool) error {
			*reviews = append(*reviews, create)
			return nil
		},
		Landed: holds,
	}
}

// Swap's skeleton against a real API server: an absent object is created
// (its write reviewed as a create), an exact replay writes nothing and
// asks no review, another value is written by an update carrying the
// read's resourceVersion (reviewed as an update); a Check, Build or
// Review refusal writes nothing; a write from a read that another writer
// overtook is a conflict and the other writer's value survives.
func TestSwap(t *testing.T) {
	ns := cp.Namespace(t)
	ctx := context.Background()
	var reviews []bool
	got, err := swapTo(t, ns, "a", &reviews).Do(ctx)
	if err != nil || !got.Created || got.Replayed || got.Object.Data["v"] != "a" {
		t.Fatalf("create: %+v %v", got, err)
	}
	rv := got.Object.ResourceVersion
	if got, err = swapTo(t, ns, "a", &reviews).Do(ctx); err != nil || !got.Replayed || got.Object.ResourceVersion != rv {
		t.Fatalf("replay: %+v %v, want replayed at %s", got, err, rv)
	}
	if got, err = swapTo(t, ns, "b", &reviews).Do(ctx); err != nil || got.Created || got.Replayed || got.Object.ResourceVersion == rv {
		t.Fatalf("update: %+v %v", got, err)
	}
	if len(reviews) != 2 || !reviews[0] || reviews[1] {
		t.Fatalf("write reviews (create?) = %v, want [true false]", reviews)
	}

	refused := swapTo(t, ns, "c", &reviews)
	refused.Review = func(context.Context, bool) error { return fail.Errorf(fail.Invalid, "not allowed") }
	if _, err := refused.Do(ctx); !fail.Is(err, fail.Invalid) || current(t, ns).Data["v"] != "b" {
		t.Fatalf("refused review: %v, value %q, want invalid and b", err, current(t, ns).Data["v"])
	}
	for _, v := range []string{"frozen", "tampered"} {
		cm := current(t, ns)
		cm.Data["v"] = v
		if _, err := cp.Clientset().CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := swapTo(t, ns, "c", &reviews).Do(ctx)
		want := map[string]fail.Class{"frozen": fail.Conflict, "tampered": fail.Tamper}[v]
		if !fail.Is(err, want) || current(t, ns).Data["v"] != v {
			t.Fatalf("over %s: %v, want class %v and nothing written", v, err, want)
		}
	}

	s := swapTo(t, ns, "d", &reviews)
	s.Check = nil
	cur, present, err := s.Read(ctx)
	if err != nil || !present {
		t.Fatal(present, err)
	}
	other := cur.DeepCopy()
	other.Data["v"] = "other"
	if _, err := cp.Clientset().CoreV1().ConfigMaps(ns).Update(ctx, other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Write(ctx, cur, present, intent(ns, "d", ""))
	if !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), "another writer won") || current(t, ns).Data["v"] != "other" {
		t.Fatalf("write from an overtaken read: %v, value %q, want conflict and the other writer's value", err, current(t, ns).Data["v"])
	}
}

// Unsettled maps the write's own unknown outcome (a lost answer under
// NoGuess), and only it: a review that fails as unavailable is returned as
// it is.
func TestSwapUnsettled(t *testing.T) {
	ns := cp.Namespace(t)
	var reviews []bool
	s := swapTo(t, ns, "a", &reviews)
	s.Unsettled = func(err error) error { return errors.New("mapped") }
	s.Review = func(context.Context, bool) error { return fail.Errorf(fail.Unavailable, "review unanswered") }
	if _, err := s.Do(context.Background()); !fail.Is(err, fail.Unavailable) || err.Error() != "review unanswered" {
		t.Fatalf("unanswered review: %v, want it as it is", err)
	}
	cfg := cp.User(t, "faulty-swapper", "system:masters")
	f := faults.Drop(cfg, faults.Write(http.MethodPost, "/namespaces/"+ns+"/configmaps", "a"))
	s = swapThrough(t, cfg, ns, "a", &reviews)
	s.Policy = cas.NoGuess
	s.Unsettled = func(err error) error { return fmt.Errorf("%w; settle it", err) }
	_, err := s.Do(context.Background())
	if f.Fired() != 1 || !fail.Is(err, fail.Unavailable) || !strings.HasSuffix(err.Error(), "; settle it") {
		t.Fatalf("lost answer (fault fired %d times): %v, want unavailable, mapped", f.Fired(), err)
	}
}

// A create into a namespace that does not exist is the missing namespace
// (invalid), said once for every ceremony by MissingNamespace.
func TestSwapMissingNamespace(t *testing.T) {
	var reviews []bool
	s := swapTo(t, "no-such-namespace", "a", &reviews)
	s.Refused = cas.MissingNamespace("no-such-namespace")
	_, err := s.Do(context.Background())
	if !fail.Is(err, fail.Invalid) || !strings.HasPrefix(err.Error(), `namespace "no-such-namespace" does not exist: create it first (`) {
		t.Fatalf("create into a missing namespace: %v, want invalid naming it", err)
	}
}
