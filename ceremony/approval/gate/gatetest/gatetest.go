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
)

// Install creates, or updates back to what the tool prints, the policy
// and its binding as admin, then WaitEnforced in ns.
func Install(t testing.TB, admin kubernetes.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	adm := admin.AdmissionregistrationV1()
	p, b := gate.Policy(), gate.Binding()
	if cur, err := adm.ValidatingAdmissionPolicies().Get(ctx, gate.PolicyName, metav1.GetOptions{}); err == nil {
		p.ResourceVersion = cur.ResourceVersion
		_, err = adm.ValidatingAdmissionPolicies().Update(ctx, p, metav1.UpdateOptions{})
		check(t, err)
	} else {
		_, err = adm.ValidatingAdmissionPolicies().Create(ctx, p, metav1.CreateOptions{})
		check(t, err)
	}
	if cur, err := adm.ValidatingAdmissionPolicyBindings().Get(ctx, gate.PolicyName, metav1.GetOptions{}); err == nil {
		b.ResourceVersion = cur.ResourceVersion
		_, err = adm.ValidatingAdmissionPolicyBindings().Update(ctx, b, metav1.UpdateOptions{})
		check(t, err)
	} else {
		_, err = adm.ValidatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{})
		check(t, err)
	}
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

func check(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
