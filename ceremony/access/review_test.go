package access

import (
	"context"
	"errors"
	"net/url"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// refusingReviewer is an API server whose review APIs do not answer as
// asked: the review must fail closed, never allow.
type refusingReviewer struct{ rulesErr, canErr error }

func (r refusingReviewer) CanI(context.Context, Access) (bool, error) { return false, r.canErr }
func (r refusingReviewer) RulesIn(context.Context, string) ([]authorizationv1.ResourceRule, error) {
	return nil, r.rulesErr
}

func TestReviewFailsClosed(t *testing.T) {
	ssar := schema.GroupResource{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}
	rules := apierrors.NewForbidden(schema.GroupResource{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"}, "", errors.New("no"))
	for _, tt := range []struct {
		name  string
		can   error
		class fail.Class
	}{
		{"access reviews forbidden", apierrors.NewForbidden(ssar, "", errors.New("no")), fail.Invalid},
		{"access reviews not served", apierrors.NewNotFound(ssar, ""), fail.Invalid},
		{"no answer", &url.Error{Op: "Post", URL: "u", Err: errors.New("reset")}, fail.Unavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReview(refusingReviewer{rulesErr: rules, canErr: tt.can})
			ok, err := r.Allowed(context.Background(), Access{Verb: "update", Resource: "configmaps", Namespace: "ns", Name: "x"})
			if ok || fail.ClassOf(err) != tt.class {
				t.Fatalf("Allowed = %v, %v (class %v), want refused with class %v", ok, err, fail.ClassOf(err), tt.class)
			}
			if err := Require(context.Background(), r, []Access{{Verb: "get", Resource: "configmaps", Namespace: "ns"}}, "hint"); fail.ClassOf(err) != tt.class {
				t.Fatalf("Require: %v, want class %v", err, tt.class)
			}
		})
	}
}

// Rules allow by verb, group, resource and, when listed, name; a
// name-restricted rule never allows a create.
func TestRulesAllow(t *testing.T) {
	rules := []authorizationv1.ResourceRule{
		{Verbs: []string{"get", "update"}, APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"head"}},
		{Verbs: []string{"*"}, APIGroups: []string{"apps"}, Resources: []string{"deployments"}},
	}
	for _, tt := range []struct {
		a    Access
		want bool
	}{
		{Access{Verb: "get", Resource: "configmaps", Name: "head"}, true},
		{Access{Verb: "get", Resource: "configmaps", Name: "other"}, false},
		{Access{Verb: "create", Resource: "configmaps"}, false},
		{Access{Verb: "delete", Resource: "configmaps", Name: "head"}, false},
		{Access{Verb: "patch", Group: "apps", Resource: "deployments", Name: "x"}, true},
		{Access{Verb: "get", Group: "apps", Resource: "statefulsets", Name: "x"}, false},
	} {
		if got := RulesAllow(rules, tt.a); got != tt.want {
			t.Errorf("RulesAllow(%v) = %v, want %v", tt.a, got, tt.want)
		}
	}
}

// denyingWebhook is an authorizer chain whose RBAC rules allow update but
// whose access review (a webhook earlier in the chain) denies it.
type denyingWebhook struct{}

func (denyingWebhook) CanI(context.Context, Access) (bool, error) { return false, nil }
func (denyingWebhook) RulesIn(context.Context, string) ([]authorizationv1.ResourceRule, error) {
	return []authorizationv1.ResourceRule{{Verbs: []string{"get", "update"}, APIGroups: []string{""}, Resources: []string{"secrets"}}}, nil
}

// A write verb is asked of the authorizer chain, never taken from the
// rules review (which lists RBAC only); reads and the fast review may use
// the rules.
func TestReviewWritesAreAuthoritative(t *testing.T) {
	upd := Access{Verb: "update", Resource: "secrets", Namespace: "ns", Name: "s"}
	get := Access{Verb: "get", Resource: "secrets", Namespace: "ns", Name: "s"}
	if ok, err := NewReview(denyingWebhook{}).Allowed(context.Background(), upd); ok || err != nil {
		t.Fatalf("update allowed by the rules alone: %v %v", ok, err)
	}
	if ok, _ := NewReview(denyingWebhook{}).Allowed(context.Background(), get); !ok {
		t.Fatal("get not allowed by the rules")
	}
	if ok, _ := NewFastReview(denyingWebhook{}).Allowed(context.Background(), upd); !ok {
		t.Fatal("the fast review did not use the rules")
	}
}
