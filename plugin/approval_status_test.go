package plugin_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate/gatetest"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy/deploytest"
	"github.com/qinglong/kubectl-ql3/ceremony/views"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// statusBypass runs status -n ns -o json and requires exit 5 with exactly
// one bypass finding per want, finding i containing want i.
func statusBypass(t *testing.T, ns string, wants ...string) {
	t.Helper()
	out, stderr, code := run(t, nil, "status", "-n", ns, "-o", "json")
	var rep views.StatusReport
	err := json.Unmarshal([]byte(out), &rep)
	ok := err == nil && code == 5 && len(rep.Bypass) == len(wants) && !rep.InSync
	for i := range wants {
		ok = ok && strings.Contains(rep.Bypass[i], wants[i])
	}
	if !ok {
		t.Fatalf("status after a raw Head write: exit %d (want 5), bypass %q (want one each containing %q), json error %v\n%s", code, rep.Bypass, wants, err, stderr)
	}
}

// publishReceipt publishes into rdir the receipt of Head h, as a rerun of
// apply would rebuild it.
func publishReceipt(t *testing.T, rdir string, h *deploy.Head) {
	t.Helper()
	r, err := deploy.ReceiptFromHead(h)
	if err == nil {
		_, err = receipts.Publish(rdir, r, nil, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// bypassIsEvident is #26's point 3 after the lifecycle (generation 1
// applied under alice's proposal and approver's approval, receipts in
// rdir): status shows who proposed and approved; then an admin moves the
// Head with kubectl, once spoofing the tool's field manager and claiming
// that approval for another preflight, once as kubectl replace dropping
// the rule: status flags each (exit 5), and history — their receipts
// published — fails the chain at the move that dropped the rule.
func bypassIsEvident(t *testing.T, ns, rdir, approver string) {
	out, stderr, code := run(t, nil, "status", "-n", ns)
	want := "Approval:    two-person rule on after this generation; generation 1 proposed by alice, approved by " + approver + " (approval uid "
	if code != 0 || !strings.Contains(out, want) || strings.Contains(out, "BYPASS") {
		t.Fatalf("status under the rule: exit %d, want 0 and %q\n%s\n%s", code, want, out, stderr)
	}
	h1 := headOf(t, ns)
	spoof := deploytest.Next(t, h1, "3.0.1")
	spoof.Transition.PreflightDigest = fmt.Sprintf("sha256:%x", sha256.Sum256([]byte("a preflight nobody approved")))
	manifest := deploytest.Manifest(t, ns, spoof)
	if out, err := cp.KubectlErr(manifest, "replace", "-f", "-", "--field-manager", deploy.HeadFieldManager); err == nil || !strings.Contains(out, gate.HeadDenialPrefix+gate.MsgHeadClaim) {
		t.Fatalf("the admin's raw Head write claiming the approval for another preflight: %v\n%s\nwant the Head policy's denial", err, out)
	}
	// Where the Head policy is not installed, the same write lands: status
	// and history must flag it.
	if err := cp.Clientset().AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), gate.HeadPolicyName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var last error
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, last = cp.KubectlErr(manifest, "replace", "-f", "-", "--field-manager", deploy.HeadFieldManager)
		return last == nil, nil
	}); err != nil {
		t.Fatalf("the raw Head write never landed without the Head binding: %v", last)
	}
	t.Cleanup(func() { gatetest.Install(t, cp.Clientset(), ns) })
	statusBypass(t, ns, "does not hold the approval policies as the tool prints them", "that object is approved by \""+approver+"\", proposed by alice, of preflight "+h1.Transition.PreflightDigest+": an approval the API server did not attest")
	publishReceipt(t, rdir, headOf(t, ns)) // the receipts a rerun of apply would rebuild from each raw Head
	dropped := deploytest.Next(t, headOf(t, ns), "3.0.2")
	dropped.ApprovalPolicy, dropped.Approval = "", nil
	cp.Kubectl(t, deploytest.Manifest(t, ns, dropped), "replace", "-f", "-")
	statusBypass(t, ns, `head.json was written by field manager "kubectl-replace"`)
	publishReceipt(t, rdir, headOf(t, ns))
	out, stderr, code = run(t, nil, "history", rdir, "-n", ns)
	want = "generation 3 moved without an approval while the two-person rule was on (generation 2 has approvalPolicy two-person)"
	if code != 5 || !strings.Contains(out+stderr, want) || !strings.Contains(out, "NONE (rule on)") {
		t.Fatalf("history against the raw Heads: exit %d, want 5 naming %q and a row approved by NONE (rule on)\n%s\n%s", code, want, out, stderr)
	}
}
