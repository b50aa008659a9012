package deploy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/approval"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate/gatetest"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// twoPerson is one namespace under the printed approval policy, and two
// administrators (client certificates in system:masters, so only the
// policy, not RBAC, stands between them and a forgery): alice deploys and
// proposes, bob approves.
type twoPerson struct {
	ns     string
	alice  deploy.Options
	aliceC approval.Clients
	bobC   approval.Clients
	t      *testing.T
}

func newTwoPerson(t *testing.T) *twoPerson {
	ns := targetNamespace(t)
	gatetest.Install(t, cp.Clientset(), ns)
	p := &twoPerson{ns: ns, t: t}
	for _, u := range []struct {
		name string
		c    *approval.Clients
	}{{"alice", &p.aliceC}, {"bob", &p.bobC}} {
		cfg := userConfig(t, u.name, "system:masters")
		c, err := approval.NewClients(cfg)
		if err != nil {
			t.Fatal(err)
		}
		*u.c = c
		if u.name == "alice" {
			p.alice = options(t, cluster(t, cfg), t.TempDir())
		}
	}
	return p
}

// preflight runs alice's preflight of dir with --approval policy.
func (p *twoPerson) preflight(dir, kind, policy string, exp deploy.ExpectedHead) (*deploy.PreflightResult, string) {
	p.t.Helper()
	out := filepath.Join(p.t.TempDir(), "pf.json")
	pf, err := deploy.RunPreflight(context.Background(), p.alice, deploy.PreflightRequest{Dir: dir, Transition: kind, Expected: exp, Out: out, Approval: policy})
	if err != nil {
		p.t.Fatalf("preflight %s %s: %v", kind, dir, err)
	}
	return pf, out
}

// receipt is the path of generation g's receipt.
func (p *twoPerson) receipt(g int64) string {
	p.t.Helper()
	m, err := filepath.Glob(filepath.Join(p.alice.ReceiptsDir, fmt.Sprintf("%06d-*", g)))
	if err != nil || len(m) != 1 {
		p.t.Fatalf("receipt of generation %d: %v %v", g, m, err)
	}
	return m[0]
}

func (p *twoPerson) apply(pf *deploy.PreflightResult) (*deploy.ApplyResult, error) {
	return deploy.RunApply(context.Background(), p.alice, deploy.ApplyRequest{Preflight: pf.Record})
}

// approve is alice's propose and bob's approval of the record at path.
func (p *twoPerson) approve(path string) {
	p.t.Helper()
	ctx := context.Background()
	if _, err := approval.Propose(ctx, p.aliceC, approval.ProposeRequest{Record: path}); err != nil {
		p.t.Fatalf("alice proposes %s: %v", path, err)
	}
	if _, err := approval.Decide(ctx, p.bobC, approval.DecideRequest{Record: path, Decision: record.Approved, Reason: "reviewed"}); err != nil {
		p.t.Fatalf("bob approves %s: %v", path, err)
	}
}

// installUnderTheRule installs dir with the rule on: alice preflights
// with --approval two-person and proposes, bob approves, alice applies. It
// returns the committed Head.
func (p *twoPerson) installUnderTheRule(dir string) *deploy.Head {
	p.t.Helper()
	pf, path := p.preflight(dir, deploy.TransitionInstall, deploy.ApprovalTwoPerson, deploy.ExpectedHead{})
	p.approve(path)
	if _, err := p.apply(pf); err != nil {
		p.t.Fatalf("apply of the approved install: %v", err)
	}
	return headOf(p.t, p.ns)
}

// withdraw is alice deleting the namespace's approval object (the
// proposer role may), leaving none.
func (p *twoPerson) withdraw() {
	p.t.Helper()
	if err := p.aliceC.CS.CoreV1().ConfigMaps(p.ns).Delete(context.Background(), record.Name, metav1.DeleteOptions{}); err != nil {
		p.t.Fatalf("alice withdraws the approval: %v", err)
	}
}

// refusedNoHeadWrite checks that apply of pf is refused as refused checks.
func (p *twoPerson) refusedNoHeadWrite(pf *deploy.PreflightResult, want string) {
	p.t.Helper()
	p.refused("apply", func() error { _, err := p.apply(pf); return err }, want)
}

// refused checks that run (alice's command what) is refused as invalid
// (exit 2) with a message containing want, the Head left exactly as it
// was, and no write of the Head by alice in the audit log during the run.
func (p *twoPerson) refused(what string, run func() error, want string) {
	p.t.Helper()
	before, writes := headOf(p.t, p.ns), p.headWrites()
	if err := run(); !fail.Is(err, fail.Invalid) || !strings.Contains(fmt.Sprint(err), want) {
		p.t.Fatalf("%s without the approval: %v, want exit 2 saying %q", what, err, want)
	}
	if after := headOf(p.t, p.ns); after.SelfDigest != before.SelfDigest {
		p.t.Fatalf("a refused %s moved the Head: generation %d -> %d", what, before.Generation, after.Generation)
	}
	if n := p.headWrites(); n != writes {
		p.t.Fatalf("audit log: alice wrote the Head %d time(s) during a refused %s", n-writes, what)
	}
}

// headWrites counts alice's writes of the Head (not dry-run) in the audit
// log so far.
func (p *twoPerson) headWrites() int {
	n := 0
	for _, e := range cp.WritesBy(p.t, "alice", p.ns) {
		if e.ObjectRef.Resource == "configmaps" && e.ObjectRef.Name == deploy.HeadName && !e.DryRun() {
			n++
		}
	}
	return n
}

// TestTwoPersonRuleGatesApply is issue #26 part 2, step 1, on a real API
// server enforcing the printed policy: turning the rule on needs an
// approval (refused without one, Head unchanged), alice proposes, bob
// approves, alice applies and the Head records both; the next record keeps
// the rule and is not approved by the earlier approval; a second record
// after an approval (the same Head) is not approved; turning the rule off
// needs an approval too (a record edited to name another proposer:
// TestProposeRefusesAnotherProposer).
func TestTwoPersonRuleGatesApply(t *testing.T) {
	p := newTwoPerson(t)
	v300 := release(t, "v3.0.0", p.ns, "")
	v310 := release(t, "v3.1.0", p.ns, "")
	v311 := release(t, "v3.1.0", p.ns, "3.1.1")
	v312 := release(t, "v3.1.0", p.ns, "3.1.2")

	pf1, _ := p.preflight(v300, deploy.TransitionInstall, "", deploy.ExpectedHead{})
	if pf1.Record.Proposer != "" || pf1.Record.Command.Approval != "" {
		t.Fatalf("a preflight without the rule names proposer %q, approval %q", pf1.Record.Proposer, pf1.Record.Command.Approval)
	}
	if _, err := p.apply(pf1); err != nil {
		t.Fatal(err)
	}
	h1 := headOf(t, p.ns)
	if h1.ApprovalPolicy != "" || h1.Approval != nil {
		t.Fatalf("head without the rule: policy %q approval %+v", h1.ApprovalPolicy, h1.Approval)
	}

	// Turning the rule on is approved like any change.
	pf2, path2 := p.preflight(v310, deploy.TransitionUpgrade, deploy.ApprovalTwoPerson, h1.Expected())
	if pf2.Record.Proposer != "alice" || pf2.Record.Command.Approval != deploy.ApprovalTwoPerson {
		t.Fatalf("record turning the rule on: proposer %q approval %q", pf2.Record.Proposer, pf2.Record.Command.Approval)
	}
	p.refusedNoHeadWrite(pf2, "absent: this preflight needs a second person's approval")
	p.approve(path2)
	if _, err := p.apply(pf2); err != nil {
		t.Fatalf("apply of the approved record: %v", err)
	}
	h2 := headOf(t, p.ns)
	if h2.Generation != 2 || h2.ApprovalPolicy != deploy.ApprovalTwoPerson || h2.Approval == nil || h2.Approval.Proposer != "alice" || h2.Approval.Approver != "bob" || h2.Approval.UID == "" {
		t.Fatalf("head after the approved transition: generation %d policy %q approval %+v", h2.Generation, h2.ApprovalPolicy, h2.Approval)
	}

	// The rule stays on; an approved record, then a second record for the
	// same Head: the approval does not carry over.
	_, path3 := p.preflight(v311, deploy.TransitionUpgrade, "", h2.Expected())
	p.approve(path3)
	pf3b, _ := p.preflight(v312, deploy.TransitionUpgrade, "", h2.Expected())
	if pf3b.Record.Command.Approval != deploy.ApprovalTwoPerson || pf3b.Record.Proposer != "alice" {
		t.Fatalf("the rule was not kept: approval %q proposer %q", pf3b.Record.Command.Approval, pf3b.Record.Proposer)
	}
	p.refusedNoHeadWrite(pf3b, "is for preflight")

	// Turning the rule off is a change that needs an approval.
	pf4, path4 := p.preflight(v312, deploy.TransitionUpgrade, deploy.ApprovalNone, h2.Expected())
	if pf4.Record.Command.Approval != "" || pf4.Record.Proposer != "alice" {
		t.Fatalf("record turning the rule off: approval %q proposer %q", pf4.Record.Command.Approval, pf4.Record.Proposer)
	}
	p.refusedNoHeadWrite(pf4, "is for preflight")
	p.approve(path4)
	if _, err := p.apply(pf4); err != nil {
		t.Fatalf("apply turning the rule off: %v", err)
	}
	h3 := headOf(t, p.ns)
	if h3.ApprovalPolicy != "" || h3.Approval == nil || h3.Approval.Approver != "bob" {
		t.Fatalf("head after turning the rule off: policy %q approval %+v", h3.ApprovalPolicy, h3.Approval)
	}
	// The receipts carry the approvals, and the chain audits.
	rep, err := receipts.Audit([]string{p.alice.ReceiptsDir}, receipts.AuditOptions{})
	if err != nil || !rep.OK() || len(rep.Receipts) != 3 {
		t.Fatalf("audit of the receipts: %+v, %v", rep, err)
	}
	if r := readReceipt(t, p.receipt(2)); r.Approval == nil || *r.Approval != *h2.Approval || r.ApprovalPolicy != deploy.ApprovalTwoPerson {
		t.Fatalf("receipt 2: policy %q approval %+v, want the Head's %+v", r.ApprovalPolicy, r.Approval, h2.Approval)
	}
}

// A record whose proposer was edited to name someone else (re-sealed, so
// its digests are consistent) cannot be proposed by its author: propose
// compares it with who the API server says the caller is.
func TestProposeRefusesAnotherProposer(t *testing.T) {
	p := newTwoPerson(t)
	v300 := release(t, "v3.0.0", p.ns, "")
	pf, _ := p.preflight(v300, deploy.TransitionInstall, deploy.ApprovalTwoPerson, deploy.ExpectedHead{})
	rec := *pf.Record
	rec.Proposer = "bob"
	if err := rec.Seal(); err != nil {
		t.Fatal(err)
	}
	data, err := rec.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	edited := filepath.Join(t.TempDir(), "edited.json")
	if err := os.WriteFile(edited, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = approval.Propose(context.Background(), p.aliceC, approval.ProposeRequest{Record: edited})
	if !fail.Is(err, fail.Invalid) || !strings.Contains(fmt.Sprint(err), "names proposer bob, but you are alice") {
		t.Fatalf("propose of a record naming bob, as alice: %v, want exit 2", err)
	}
	if _, _, present, err := gate.Read(context.Background(), cp.Clientset(), p.ns); err != nil || present {
		t.Fatalf("the refused propose wrote an approval object (present %v, %v)", present, err)
	}
}
