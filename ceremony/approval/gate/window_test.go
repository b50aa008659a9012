package gate_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// An approval forged while the policy was not enforced does not count
// once it is enforced again: the binding deleted, alice creates the object
// already approved in bob's name (the API server lets her), the binding
// restored — the gate refuses, naming the window. The same approval
// written properly after the restore passes.
func TestGateRefusesAnApprovalFromAPolicyGap(t *testing.T) {
	installPolicy(t)
	ns := cp.Namespace(t)
	alice, bob := editor(t, ns, "alice"), editor(t, ns, "bob")
	ctx := context.Background()
	adm := cp.Clientset().AdmissionregistrationV1()
	if err := adm.ValidatingAdmissionPolicyBindings().Delete(ctx, gate.PolicyName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	forged := gate.ConfigMap(ns, pending("alice").Decided(record.Approved, "bob", ""))
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, last = alice.CoreV1().ConfigMaps(ns).Create(ctx, forged, metav1.CreateOptions{})
		return last == nil, nil
	}); err != nil {
		t.Fatalf("the forgery was never accepted with the binding deleted: %v", last)
	}
	installPolicy(t) // restored as printed, enforced, its window over
	_, err := gate.Check(ctx, cp.Clientset(), ns, digestA, digestA, "ql3h1-0-none")
	if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "less than "+gate.AttestWindow.String()+" after the approval policies last changed") ||
		!strings.Contains(err.Error(), "ValidatingAdmissionPolicyBinding "+gate.PolicyName) {
		t.Fatalf("Check of an approval forged in the gap: %v, want invalid naming the window and the binding", err)
	}
	// Proposed and approved again under the enforced policy: it counts.
	if err := alice.CoreV1().ConfigMaps(ns).Delete(ctx, record.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	uid := approved(t, ns, alice, bob)
	got, err := gate.Check(ctx, cp.Clientset(), ns, digestA, digestA, "ql3h1-0-none")
	if err != nil || got.UID != uid || got.Approver != "bob" || got.Proposer != "alice" {
		t.Fatalf("Check after proposing again: %+v, %v", got, err)
	}
}
