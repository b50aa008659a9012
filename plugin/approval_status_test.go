package plugin_test

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy/deploytest"
	"github.com/qinglong/kubectl-ql3/ceremony/views"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// statusBypass runs status -n ns -o json and requires exit 5 with exactly
// one bypass finding containing want.
func statusBypass(t *testing.T, ns, want string) {
	t.Helper()
	out, stderr, code := run(t, nil, "status", "-n", ns, "-o", "json")
	var rep views.StatusReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 5 || len(rep.Bypass) != 1 || !strings.Contains(rep.Bypass[0], want) || rep.InSync {
		t.Fatalf("status after a raw Head write: exit %d (want 5), bypass %q (want one containing %q), json error %v\n%s", code, rep.Bypass, want, err, stderr)
	}
}

// publishReceipt publishes into rdir the receipt of Head h, as a rerun of
// apply would rebuild it.
func publishReceipt(t *testing.T, rdir string, h *deploy.Head) {
	t.Helper()
	r, err := deploy.ReceiptFromHead(h)
	if err == nil {
		_, err = receipts.Publish(rdir, r, nil)
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
	cp.Kubectl(t, deploytest.Manifest(t, ns, spoof), "replace", "-f", "-", "--field-manager", deploy.HeadFieldManager)
	statusBypass(t, ns, "that object is approved by \""+approver+"\", proposed by alice, of preflight "+h1.Transition.PreflightDigest+": an approval the API server did not attest")
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
