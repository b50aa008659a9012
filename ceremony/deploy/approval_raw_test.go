package deploy_test

import (
	"context"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy/deploytest"
	"github.com/qinglong/kubectl-ql3/ceremony/views"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// A cluster admin bypasses the tool: with the two-person rule on at
// generation 1, they write with kubectl, under the tool's own field manager
// name, a valid, self-consistent generation 2 that drops the rule and
// carries no approval. Every reader of the Head alone accepts it — status
// too finds no bypass (docs/approval.md §9: what status cannot see); its
// receipt (built from the Head as a rerun of apply rebuilds it) makes the
// chain fail the audit, naming the move.
func TestRawHeadWriteBreaksTheAuditChain(t *testing.T) {
	p := newTwoPerson(t)
	v300 := release(t, "v3.0.0", p.ns, "")
	h1 := p.installUnderTheRule(v300)
	raw := deploytest.Next(t, h1, "3.0.1")
	raw.ApprovalPolicy, raw.Approval = "", nil
	cp.Kubectl(t, deploytest.Manifest(t, p.ns, raw), "replace", "-f", "-", "--field-manager", deploy.HeadFieldManager)
	h2 := headOf(t, p.ns) // every reader accepts the raw Head alone
	if h2.Generation != 2 || h2.Approval != nil || h2.ApprovalPolicy != "" {
		t.Fatalf("raw head: %+v", h2)
	}
	st, err := views.Status(context.Background(), p.alice.Cluster, p.ns, 0, nil)
	if err != nil || len(st.Bypass) != 0 || st.Approval != nil {
		t.Fatalf("status of the spoofed Head: bypass %q, approval %+v, %v; want none (what status cannot see)", st.Bypass, st.Approval, err)
	}
	r2, err := deploy.ReceiptFromHead(h2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := receipts.Publish(p.alice.ReceiptsDir, r2, nil); err != nil {
		t.Fatal(err)
	}
	rep, err := receipts.Audit([]string{p.alice.ReceiptsDir}, receipts.AuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := "generation 2 moved without an approval while the two-person rule was on (generation 1 has approvalPolicy two-person)"
	if rep.OK() || len(rep.Receipts) != 2 || !strings.Contains(strings.Join(rep.Chain.Reasons, "\n"), want) {
		t.Fatalf("audit: verdict %s, chain %+v; want the chain to fail with %q", rep.Verdict, rep.Chain, want)
	}
}
