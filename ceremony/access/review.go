// Package access is the permission review every ceremony runs before its
// first write, failing closed (Review, Require: the API server's
// SelfSubjectAccessReview; a namespace's rules review only ever allows),
// and the helpers every `rbac` command prints its least privilege with
// (Role, ClusterRole, Binding and its name). It knows no ceremony: each
// keeps its own rules in its own rbac.go. It shares only the CAS kernel's
// classifier of API errors, so that a review the API server did not answer
// is classified like every other request.
package access

import (
	"context"
	"slices"
	"strings"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// Access is one permission: a verb on a resource, optionally one object
// (Name) in one namespace.
type Access struct {
	Verb, Group, Resource, Namespace, Name string
}

func (a Access) String() string {
	res := a.Resource
	if a.Group != "" {
		res += "." + a.Group
	}
	s := a.Verb + " " + res
	if a.Name != "" {
		s += "/" + a.Name
	}
	if a.Namespace != "" {
		s += " in namespace " + a.Namespace
	}
	return s
}

// Reviewer asks the API server what the caller may do. It is a required
// capability of every cluster the operations write to: there is no
// "cannot review, assume allowed".
type Reviewer interface {
	// CanI is a SelfSubjectAccessReview: the authorizer's own answer.
	CanI(ctx context.Context, a Access) (bool, error)
	// RulesIn is a SelfSubjectRulesReview of namespace ns. It may be
	// incomplete (webhook authorizers): it is only ever used to allow.
	RulesIn(ctx context.Context, ns string) ([]authorizationv1.ResourceRule, error)
}

type kubeReviewer struct{ cs kubernetes.Interface }

// NewReviewer reviews through the typed client cs.
func NewReviewer(cs kubernetes.Interface) Reviewer { return kubeReviewer{cs} }

func (k kubeReviewer) CanI(ctx context.Context, a Access) (bool, error) {
	r, err := k.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: a.Verb, Group: a.Group, Resource: a.Resource, Namespace: a.Namespace, Name: a.Name,
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return r.Status.Allowed, nil
}

func (k kubeReviewer) RulesIn(ctx context.Context, ns string) ([]authorizationv1.ResourceRule, error) {
	r, err := k.cs.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
		Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: ns},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return r.Status.ResourceRules, nil
}

// Review answers "may I" for one command, asking the API server once per
// permission (SelfSubjectAccessReview: the authorizer chain's own answer).
// A namespace's rules review (SelfSubjectRulesReview) lists RBAC's rules
// only — an authorizer webhook earlier in the chain may still deny — so it
// may answer a read verb, and, in a review made with NewFastReview, any
// verb. It is safe for concurrent use.
type Review struct {
	fast    bool // rules may allow write verbs too
	rev     Reviewer
	mu      sync.Mutex
	rules   map[string]*nsRules
	answers map[Access]bool
}

// nsRules is one namespace's rules review, asked once however many
// checks of the namespace run concurrently (the deployment ceremony
// checks its objects in parallel: each used to ask for the same rules).
type nsRules struct {
	once  sync.Once
	rules []authorizationv1.ResourceRule
	ok    bool // the review answered; otherwise every permission is asked
}

// NewReview starts a review through rev in which every write verb is asked
// of the API server: for operations that write a few objects in order,
// so that no later write can be denied by an authorizer the rules review
// does not see after an earlier one landed.
func NewReview(rev Reviewer) *Review {
	return &Review{rev: rev, rules: map[string]*nsRules{}, answers: map[Access]bool{}}
}

// NewFastReview is NewReview where a namespace's RBAC rules may allow any
// verb, each permission they do not allow being asked: for the deployment
// ceremony, which reviews thousands of objects (one request per namespace
// instead of one per object). Under an authorizer webhook that denies what
// RBAC allows, a write can then still be refused after the Head is held:
// the Head stays applying, resume continues once it is granted
// (docs/ceremony.md §6.2).
func NewFastReview(rev Reviewer) *Review {
	r := NewReview(rev)
	r.fast = true
	return r
}

func readVerb(v string) bool { return v == "get" || v == "list" || v == "watch" }

// Allowed reports whether the caller holds a. A review the API server does
// not answer is an error, never an allowance: the caller fails closed.
func (r *Review) Allowed(ctx context.Context, a Access) (bool, error) {
	if a.Namespace != "" && (r.fast || readVerb(a.Verb)) && r.rulesAllow(ctx, a) {
		return true, nil
	}
	r.mu.Lock()
	ok, asked := r.answers[a]
	r.mu.Unlock()
	if asked {
		return ok, nil
	}
	ok, err := r.rev.CanI(ctx, a)
	if err != nil {
		return false, unanswerable(a, err)
	}
	r.mu.Lock()
	r.answers[a] = ok
	r.mu.Unlock()
	return ok, nil
}

// RulesAllowed reports whether the RBAC rules of a's namespace (its rules
// review, made once per review) allow a, never asking the authorizer chain:
// false is only "the rules do not show it". It is for an optional read
// that is made only when granted (converge's watch): a request tried
// without the grant would be a refusal in the audit log.
func (r *Review) RulesAllowed(ctx context.Context, a Access) bool {
	return a.Namespace != "" && r.rulesAllow(ctx, a)
}

// rulesAllow asks for the rules of a's namespace once and evaluates them.
// Concurrent checks of one namespace wait for the one review in flight.
func (r *Review) rulesAllow(ctx context.Context, a Access) bool {
	r.mu.Lock()
	n := r.rules[a.Namespace]
	if n == nil {
		n = &nsRules{}
		r.rules[a.Namespace] = n
	}
	r.mu.Unlock()
	n.once.Do(func() {
		// No rules review here (forbidden, not served, or an authorizer
		// that cannot list rules): every permission is asked one by
		// one, which is authoritative.
		rules, err := r.rev.RulesIn(ctx, a.Namespace)
		n.rules, n.ok = rules, err == nil
	})
	return n.ok && RulesAllow(n.rules, a)
}

// unanswerable is the error of a review the API server did not answer.
func unanswerable(a Access, err error) error {
	if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
		return fail.Errorf(fail.Invalid, "permission review: the API server does not let us ask whether we may %s (%v), so nothing was written: the caller needs create on selfsubjectaccessreviews.authorization.k8s.io (the default system:basic-user ClusterRole grants it to every authenticated user)", a, err)
	}
	return cas.Classify(cas.OpCreate, "permission review of "+a.String(), err)
}

// RulesAllow evaluates RBAC-style rules: every listed verb, group and
// resource matches itself or "*"; resource names, when listed, must name
// the object (so they never allow a create, whose name is not in the URL).
func RulesAllow(rules []authorizationv1.ResourceRule, a Access) bool {
	has := func(list []string, v string) bool { return slices.Contains(list, v) || slices.Contains(list, "*") }
	for _, r := range rules {
		if has(r.Verbs, a.Verb) && has(r.APIGroups, a.Group) && has(r.Resources, a.Resource) &&
			(len(r.ResourceNames) == 0 || (a.Name != "" && slices.Contains(r.ResourceNames, a.Name))) {
			return true
		}
	}
	return false
}

// Require fails closed, before any write, unless the caller holds every
// permission in needs. The error (invalid, exit 2) lists what is missing
// and ends with hint (e.g. "`kubectl ql3 package rbac` prints the least
// privilege").
func Require(ctx context.Context, r *Review, needs []Access, hint string) error {
	var missing []string
	for _, a := range needs {
		ok, err := r.Allowed(ctx, a)
		if err != nil {
			return err
		}
		if !ok {
			missing = append(missing, a.String())
		}
	}
	return MissingError(missing, hint)
}

// MissingError is the invalid-input error for missing permissions (nil
// when none is missing).
func MissingError(missing []string, hint string) error {
	if len(missing) == 0 {
		return nil
	}
	slices.Sort(missing)
	missing = slices.Compact(missing)
	return fail.Errorf(fail.Invalid, "access: the caller lacks %d permission(s) this operation needs, so nothing was written: %s (%s)", len(missing), strings.Join(missing, "; "), hint)
}

// CreateOrUpdate is the permission of a compare-and-swap write of a's
// object: its create when create (a create names no object: its name is in
// the body, not the URL, so RBAC cannot limit it by name), else its update.
func (a Access) CreateOrUpdate(create bool) Access {
	if create {
		a.Verb, a.Name = "create", ""
		return a
	}
	a.Verb = "update"
	return a
}
