package deploy_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// A cluster admin bypasses the tool: with the two-person rule on at
// generation 1, they write with kubectl a valid, self-consistent
// generation 2 that drops the rule and carries no approval. Every reader
// accepts that Head alone; its receipt (built from the Head as a rerun of
// apply rebuilds it) makes the chain fail the audit, naming the move.
func TestRawHeadWriteBreaksTheAuditChain(t *testing.T) {
	p := newTwoPerson(t)
	v300 := release(t, "v3.0.0", p.ns, "")
	h1 := p.installUnderTheRule(v300)
	r1, err := deploy.ReceiptFromHead(h1)
	if err != nil {
		t.Fatal(err)
	}
	raw := *h1
	prev := h1.Current.Deployment
	raw.Generation, raw.Previous, raw.PreviousReceiptDigest = 2, &prev, r1.SelfDigest
	raw.Transition.Kind, raw.Transition.MutationID = deploy.TransitionUpgrade, strings.Repeat("ab", 16)
	raw.Current.Version = "3.0.1"
	raw.ApprovalPolicy, raw.Approval = "", nil
	if err := raw.Seal(); err != nil {
		t.Fatal(err)
	}
	cm, err := raw.ConfigMap(p.ns)
	if err != nil {
		t.Fatal(err)
	}
	cm.APIVersion, cm.Kind = "v1", "ConfigMap"
	doc, err := yaml.Marshal(cm)
	if err != nil {
		t.Fatal(err)
	}
	kubectl := exec.Command(filepath.Join(cp.BinDir, "kubectl"), "--kubeconfig", cp.AdminKubeconfig, "replace", "-f", "-")
	kubectl.Stdin = strings.NewReader(string(doc))
	if out, err := kubectl.CombinedOutput(); err != nil {
		t.Fatalf("kubectl replace: %v\n%s", err, out)
	}
	h2 := headOf(t, p.ns) // every reader accepts the raw Head alone
	if h2.Generation != 2 || h2.Approval != nil || h2.ApprovalPolicy != "" {
		t.Fatalf("raw head: %+v", h2)
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
