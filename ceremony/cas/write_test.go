package cas

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// scripted is a ConfigMap store for the branch logic of Write only: each
// write consumes one scripted step (apply it or not, then answer with err).
// It is not evidence for any CAS claim — the real API server tests in
// cluster_test.go are — it only drives every decision branch of Do.
type scripted struct {
	obj     *corev1.ConfigMap // nil: absent
	rv      int
	steps   []step
	gets    int
	getErrs []error // answered (in order) before reads succeed
	writes  int
}

type step struct {
	land bool  // the write is carried out before answering
	err  error // the answer (nil: success)
	// other, when set, is written by "someone else" instead.
	other map[string]string
}

func (s *scripted) Get(_ context.Context, name string, _ metav1.GetOptions) (*corev1.ConfigMap, error) {
	s.gets++
	if len(s.getErrs) > 0 {
		err := s.getErrs[0]
		s.getErrs = s.getErrs[1:]
		return nil, err
	}
	if s.obj == nil {
		return nil, apierrors.NewNotFound(cmGR, name)
	}
	return s.obj.DeepCopy(), nil
}

func (s *scripted) write(obj *corev1.ConfigMap, create bool) (*corev1.ConfigMap, error) {
	s.writes++
	st := step{land: true}
	if len(s.steps) > 0 {
		st, s.steps = s.steps[0], s.steps[1:]
	}
	if st.other != nil {
		s.rv++
		s.obj = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: obj.Name, ResourceVersion: itoa(s.rv)}, Data: st.other}
	} else if st.land {
		switch {
		case create && s.obj != nil:
			return nil, apierrors.NewAlreadyExists(cmGR, obj.Name)
		case !create && (s.obj == nil || s.obj.ResourceVersion != obj.ResourceVersion):
			return nil, apierrors.NewConflict(cmGR, obj.Name, errors.New("stale"))
		}
		s.rv++
		s.obj = obj.DeepCopy()
		s.obj.ResourceVersion = itoa(s.rv)
	}
	if st.err != nil {
		return nil, st.err
	}
	return s.obj.DeepCopy(), nil
}

func (s *scripted) Create(_ context.Context, obj *corev1.ConfigMap, _ metav1.CreateOptions) (*corev1.ConfigMap, error) {
	return s.write(obj, true)
}

func (s *scripted) Update(_ context.Context, obj *corev1.ConfigMap, _ metav1.UpdateOptions) (*corev1.ConfigMap, error) {
	return s.write(obj, false)
}

func itoa(i int) string { return strconv.Itoa(i) + "x" }

// lost is what client-go returns when the connection broke after the
// request was sent: a *url.Error.
var lost = &url.Error{Op: "Put", URL: "https://127.0.0.1/api/v1/namespaces/ns/configmaps/p", Err: errors.New("injected: the answer was lost")}

func cm(v, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "p", ResourceVersion: rv}, Data: map[string]string{"v": v}}
}

// Every decision branch of Write.Do.
func TestWriteBranches(t *testing.T) {
	tests := []struct {
		name    string
		start   *corev1.ConfigMap // the store before the write
		create  bool
		policy  Policy
		steps   []step
		getErrs []error
		refused func(Op, error) error
		class   fail.Class // fail.Other with ok: success
		ok      bool
		settled bool
		gets    int // reads made to settle
		writes  int
	}{
		{name: "create answered", create: true, ok: true, writes: 1},
		{name: "update answered", start: cm("old", "1x"), ok: true, writes: 1},
		{name: "definite refusal 422", create: true, steps: []step{{land: false, err: apierrors.NewInvalid(cmGR.WithVersion("v1").GroupVersion().WithKind("ConfigMap").GroupKind(), "p", nil)}}, class: fail.Invalid, writes: 1},
		{name: "refusal mapped by the caller", create: true, steps: []step{{land: false, err: apierrors.NewNotFound(cmGR, "ns")}},
			refused: func(op Op, err error) error { return fail.Errorf(fail.Invalid, "control namespace missing") }, class: fail.Invalid, writes: 1},
		{name: "update 404: removed", start: cm("old", "1x"), steps: []step{{land: false, err: apierrors.NewNotFound(cmGR, "p")}}, class: fail.Conflict, writes: 1},
		{name: "409 and the winner is us (exact replay)", start: cm("old", "1x"), steps: []step{{land: true, err: apierrors.NewConflict(cmGR, "p", errors.New("x"))}}, ok: true, settled: true, gets: 1, writes: 1},
		{name: "409 and another winner", start: cm("old", "1x"), steps: []step{{other: map[string]string{"v": "theirs"}, err: apierrors.NewConflict(cmGR, "p", errors.New("x"))}}, class: fail.Conflict, gets: 1, writes: 1},
		{name: "lost answer, landed", create: true, steps: []step{{land: true, err: lost}}, ok: true, settled: true, gets: 1, writes: 1},
		{name: "lost answer, not landed, resent", start: cm("old", "1x"), steps: []step{{land: false, err: lost}, {land: true}}, ok: true, gets: 1, writes: 2},
		{name: "lost answer every time: unavailable", start: cm("old", "1x"), steps: []step{{err: lost, land: false}, {err: lost, land: false}, {err: lost, land: false}, {err: lost, land: false}}, class: fail.Unavailable, gets: 4, writes: 4},
		{name: "lost answer, settle once, unchanged", create: true, policy: SettleOnce, steps: []step{{land: false, err: lost}}, class: fail.Unavailable, gets: 1, writes: 1},
		{name: "lost answer, no guess", create: true, policy: NoGuess, steps: []step{{land: true, err: lost}}, class: fail.Unavailable, gets: 0, writes: 1},
		{name: "no guess still settles a 409", start: cm("old", "1x"), policy: NoGuess, steps: []step{{land: true, err: apierrors.NewConflict(cmGR, "p", errors.New("x"))}}, ok: true, settled: true, gets: 1, writes: 1},
		{name: "5xx, another writer moved it", start: cm("old", "1x"), steps: []step{{other: map[string]string{"v": "theirs"}, err: apierrors.NewInternalError(errors.New("etcd"))}}, class: fail.Conflict, gets: 1, writes: 1},
		// A refused settling read says nothing about the write: unknown, never invalid.
		{name: "settle read forbidden", create: true, steps: []step{{land: false, err: lost}}, getErrs: []error{apierrors.NewForbidden(cmGR, "p", errors.New("no get"))}, class: fail.Unavailable, gets: 1, writes: 1},
		{name: "settle read unauthorized", start: cm("old", "1x"), steps: []step{{land: true, err: lost}}, getErrs: []error{apierrors.NewUnauthorized("token expired")}, class: fail.Unavailable, gets: 1, writes: 1},
		{name: "settle read without credentials", start: cm("old", "1x"), steps: []step{{land: true, err: lost}}, getErrs: []error{errors.New("getting credentials: exec: executable ql3-login failed with exit code 1")}, class: fail.Unavailable, gets: 1, writes: 1},
		{name: "409, settle read forbidden", start: cm("old", "1x"), steps: []step{{land: true, err: apierrors.NewConflict(cmGR, "p", errors.New("x"))}}, getErrs: []error{apierrors.NewForbidden(cmGR, "p", errors.New("no get"))}, class: fail.Unavailable, gets: 1, writes: 1},
		{name: "settle read retried until answered", create: true, steps: []step{{land: true, err: lost}}, getErrs: []error{lost, apierrors.NewServiceUnavailable("x")}, ok: true, settled: true, gets: 3, writes: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &scripted{steps: tt.steps, getErrs: tt.getErrs}
			desired := cm("ours", "")
			if tt.start != nil {
				s.obj, s.rv = tt.start.DeepCopy(), 1
				desired.ResourceVersion = tt.start.ResourceVersion
			}
			w := Write[*corev1.ConfigMap]{
				Client: s, What: "pointer ns/p", Desired: desired, Create: tt.create, Policy: tt.policy,
				Refused: tt.refused,
				Landed:  func(cur *corev1.ConfigMap) bool { return cur.Data["v"] == "ours" },
				Say:     func(f string, a ...any) { t.Logf(f, a...) },
			}
			res, err := w.Do(context.Background())
			switch {
			case tt.ok && err != nil:
				t.Fatalf("Do: %v, want success", err)
			case !tt.ok && fail.ClassOf(err) != tt.class:
				t.Fatalf("Do: %v (class %v), want class %v", err, fail.ClassOf(err), tt.class)
			}
			if tt.ok && (res.Settled != tt.settled || res.Object.Data["v"] != "ours") {
				t.Errorf("result %+v, settled want %v", res, tt.settled)
			}
			if s.gets != tt.gets || s.writes != tt.writes {
				t.Errorf("%d reads and %d writes, want %d and %d", s.gets, s.writes, tt.gets, tt.writes)
			}
			if !tt.ok && s.obj != nil && s.obj.Data["v"] == "ours" && tt.class != fail.Unavailable {
				t.Errorf("a failed write left our intent in the store")
			}
		})
	}
}

// A Validate error on the settling read (a tampered object) is returned as
// it is, before any decision.
func TestWriteValidate(t *testing.T) {
	s := &scripted{steps: []step{{land: true, err: lost}}}
	w := Write[*corev1.ConfigMap]{
		Client: s, What: "head", Desired: cm("ours", ""), Create: true,
		Validate: func(*corev1.ConfigMap, bool) error { return fail.Errorf(fail.Tamper, "tampered") },
		Landed:   func(*corev1.ConfigMap) bool { return true },
	}
	if _, err := w.Do(context.Background()); !fail.Is(err, fail.Tamper) {
		t.Fatalf("Do: %v, want tamper", err)
	}
	u := Write[*corev1.ConfigMap]{Client: s, What: "head", Desired: cm("ours", ""), Landed: w.Landed}
	if _, err := u.Do(context.Background()); err == nil || !strings.Contains(err.Error(), "without resourceVersion") {
		t.Fatalf("update without resourceVersion: %v", err)
	}
}
