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

// Install creates, or updates back to what the tool prints, the two
// policies and their bindings as admin, then WaitEnforced in ns.
func Install(t testing.TB, admin kubernetes.Interface, ns string) {
	t.Helper()
	Put(t, admin)
	WaitEnforced(t, admin, ns)
}

// Put creates, or updates back to what the tool prints, the two policies
// and their bindings as admin, without waiting for them to be enforced.
func Put(t testing.TB, admin kubernetes.Interface) {
	t.Helper()
	adm := admin.AdmissionregistrationV1()
	put(t, adm.ValidatingAdmissionPolicies(), gate.Policy())
	put(t, adm.ValidatingAdmissionPolicyBindings(), gate.Binding())
	put(t, adm.ValidatingAdmissionPolicies(), gate.HeadPolicy())
	put(t, adm.ValidatingAdmissionPolicyBindings(), gate.HeadBinding())
}

// WaitEnforced polls gate.VerifyPolicy in ns as admin, with a 30s
// deadline, until the API server enforces the policies (it compiles a new
// policy a moment after it is written), and then until the attestation
// window after their last change has passed on the API server's clock
// (the same host's), so that an approval created from now on counts.
func WaitEnforced(t testing.TB, admin kubernetes.Interface, ns string) {
	t.Helper()
	var last error
	var e gate.Enforced
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		e, last = gate.VerifyPolicy(ctx, admin, ns)
		return last == nil && e.Attested(time.Now().Add(-time.Second)), nil
	}); err != nil {
		t.Fatalf("the approval policies are not enforced, or their window not over, after 30s: %v (last change %s at %s)", last, e.ChangedBy, e.ChangedAt)
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
