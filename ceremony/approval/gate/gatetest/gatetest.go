// Package gatetest installs the printed approval policy for tests and
// waits until the API server enforces it. Only tests import it.
package gatetest

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
	"github.com/qinglong/kubectl-ql3/ceremony/cas"
)

// Install creates, or updates back to what the tool prints, the policy
// and its binding as admin, then WaitEnforced in ns.
func Install(t testing.TB, admin kubernetes.Interface, ns string) {
	t.Helper()
	adm := admin.AdmissionregistrationV1()
	put(t, adm.ValidatingAdmissionPolicies(), gate.Policy())
	put(t, adm.ValidatingAdmissionPolicyBindings(), gate.Binding())
	WaitEnforced(t, admin, ns)
}

// WaitEnforced polls gate.VerifyPolicy in ns as admin, with a 30s
// deadline, until the API server enforces the policy (it compiles a new
// policy a moment after it is written).
func WaitEnforced(t testing.TB, admin kubernetes.Interface, ns string) {
	t.Helper()
	var last error
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		last = gate.VerifyPolicy(ctx, admin, ns)
		return last == nil, nil
	}); err != nil {
		t.Fatalf("the approval policy is not enforced after 30s: %v", last)
	}
}

// put creates obj, or updates the object of its name to it.
func put[T cas.Object](t testing.TB, c cas.Client[T], obj T) {
	t.Helper()
	ctx := context.Background()
	cur, err := c.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if err == nil {
		obj.SetResourceVersion(cur.GetResourceVersion())
		_, err = c.Update(ctx, obj, metav1.UpdateOptions{})
	} else {
		_, err = c.Create(ctx, obj, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}
