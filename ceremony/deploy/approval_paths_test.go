package deploy_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qinglong/kubectl-ql3/ceremony/approval"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// rollbackRefused runs alice's `kubectl ql3 rollback dir` against exp and
// checks it is refused by the gate as refused checks, the error naming the
// record and the apply that continues it once approved (not resume: the
// Head was not acquired). It returns the rollback's record and its path.
func (p *twoPerson) rollbackRefused(dir string, exp deploy.ExpectedHead, want string) (*deploy.PreflightRecord, string) {
	p.t.Helper()
	out := filepath.Join(p.t.TempDir(), "rollback.json")
	p.refused("rollback", func() error {
		_, err := deploy.RunRollback(context.Background(), p.alice, deploy.PreflightRequest{Dir: dir, Expected: exp, Out: out})
		if err != nil && !strings.Contains(err.Error(), "`kubectl ql3 apply --preflight "+out+"` applies it") {
			p.t.Errorf("the refused rollback does not say how to continue: %v", err)
		}
		return err
	}, want)
	rec, err := deploy.ReadPreflight(out)
	if err != nil {
		p.t.Fatalf("the refused rollback's record: %v", err)
	}
	return rec, out
}

// approvedHead checks that h records exactly the approval object of the
// namespace as it is now (alice proposed, bob approved, its uid and
// resourceVersion) under policy, and that generation h's receipt carries
// the same.
func (p *twoPerson) approvedHead(h *deploy.Head, policy string, pf *deploy.PreflightRecord) {
	p.t.Helper()
	cm, a, present, err := gate.Read(context.Background(), cp.Clientset(), p.ns)
	if err != nil || !present || a.PreflightDigest != pf.SelfDigest || a.Decision != record.Approved {
		p.t.Fatalf("the approval object: present %v %+v %v, want approved for preflight %s", present, a, err, pf.SelfDigest)
	}
	want := deploy.HeadApproval{Proposer: "alice", Approver: "bob", UID: string(cm.UID), ResourceVersion: cm.ResourceVersion}
	if h.Phase != deploy.PhaseCommitted || h.Transition.PreflightDigest != pf.SelfDigest || h.ApprovalPolicy != policy || h.Approval == nil || *h.Approval != want {
		p.t.Fatalf("head generation %d %s of preflight %s: policy %q approval %+v, want committed, %s, policy %q approval %+v",
			h.Generation, h.Phase, h.Transition.PreflightDigest, h.ApprovalPolicy, h.Approval, pf.SelfDigest, policy, want)
	}
	if r := readReceipt(p.t, p.receipt(h.Generation)); r.ApprovalPolicy != policy || r.Approval == nil || *r.Approval != want {
		p.t.Fatalf("receipt %d: policy %q approval %+v, want the Head's %q %+v", h.Generation, r.ApprovalPolicy, r.Approval, policy, want)
	}
}

// audit checks that the receipts directory audits as one chain of n
// receipts, and returns the chain's notes.
func (p *twoPerson) audit(n int) string {
	p.t.Helper()
	rep, err := receipts.Audit([]string{p.alice.ReceiptsDir}, receipts.AuditOptions{})
	if err != nil || !rep.OK() || len(rep.Receipts) != n {
		p.t.Fatalf("audit of the receipts: %+v, %v; want %d receipts, ok", rep, err, n)
	}
	return strings.Join(rep.Chain.Notes, "\n")
}

// TestRollbackUnderTheRule is issue #26 for `kubectl ql3 rollback`
// (docs/approval.md §8): the rule is turned on by an approved upgrade;
// a rollback to the install is refused without an approval and with the
// approval of another record (a rollback record turning the rule off,
// which needs an approval too: the only way to drop the rule); once
// alice proposes the rollback's own record and bob approves it, apply of
// that record commits, the Head keeping the rule (rollback keeps the
// Head's policy, not the one of the deployment it returns to) and
// recording the approval, as its receipt does; the chain audits.
func TestRollbackUnderTheRule(t *testing.T) {
	p := newTwoPerson(t)
	ctx := context.Background()
	v300 := release(t, "v3.0.0", p.ns, "")
	v301 := release(t, "v3.0.0", p.ns, "3.0.1") // the same objects: a rollback keeps them
	pf1, _ := p.preflight(v300, deploy.TransitionInstall, "", deploy.ExpectedHead{})
	if _, err := p.apply(pf1); err != nil {
		t.Fatal(err)
	}
	h1 := headOf(t, p.ns)
	pf2, path2 := p.preflight(v301, deploy.TransitionUpgrade, deploy.ApprovalTwoPerson, h1.Expected())
	p.approve(path2)
	if _, err := p.apply(pf2); err != nil {
		t.Fatalf("apply of the approved upgrade: %v", err)
	}
	h2 := headOf(t, p.ns)
	p.approvedHead(h2, deploy.ApprovalTwoPerson, pf2.Record)

	// Without an approval: alice withdraws the upgrade's (the proposer
	// role may delete it).
	p.withdraw()
	rb1, _ := p.rollbackRefused(v300, h2.Expected(), "absent: this preflight needs a second person's approval")
	if rb1.Command.Transition != deploy.TransitionRollback || rb1.Command.Approval != deploy.ApprovalTwoPerson || rb1.Proposer != "alice" {
		t.Fatalf("rollback record: transition %q approval %q proposer %q, want rollback keeping two-person, proposed by alice", rb1.Command.Transition, rb1.Command.Approval, rb1.Proposer)
	}
	// Nothing was acquired, so there is nothing to resume.
	if _, err := deploy.RunApply(ctx, p.alice, deploy.ApplyRequest{Preflight: rb1, Resume: true}); !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), "not applying this preflight") {
		t.Fatalf("resume of the refused rollback: %v (class %v), want conflict: the Head is not applying it", err, fail.ClassOf(err))
	}

	// A rollback record turning the rule off needs an approval as well;
	// approved, it does not approve the rollback that keeps the rule.
	off, offPath := p.preflight(v300, deploy.TransitionRollback, deploy.ApprovalNone, h2.Expected())
	if off.Record.Command.Approval != "" || off.Record.Proposer != "alice" {
		t.Fatalf("rollback record turning the rule off: approval %q proposer %q, want absent and alice", off.Record.Command.Approval, off.Record.Proposer)
	}
	p.refusedNoHeadWrite(off, "absent: this preflight needs a second person's approval")
	p.approve(offPath)
	rb2, rb2Path := p.rollbackRefused(v300, h2.Expected(), "is for preflight "+off.Record.SelfDigest)

	// Its own record, proposed and approved, is applied.
	p.approve(rb2Path)
	res, err := deploy.RunApply(ctx, p.alice, deploy.ApplyRequest{Preflight: rb2})
	if err != nil || res.Outcome != "committed" || res.Generation != 3 {
		t.Fatalf("apply of the approved rollback: %+v %v", res, err)
	}
	h3 := headOf(t, p.ns)
	if h3.Transition.Kind != deploy.TransitionRollback || h3.Current.Deployment != h1.Current.Deployment || *h3.Previous != h2.Current.Deployment {
		t.Fatalf("head after the rollback: %s to %+v from %+v, want rollback to %+v", h3.Transition.Kind, h3.Current.Deployment, h3.Previous, h1.Current.Deployment)
	}
	p.approvedHead(h3, deploy.ApprovalTwoPerson, rb2)
	p.audit(3)
}

// TestSupersedeUnderTheRule is issue #26 for `--supersede` (docs/approval.md
// §8, docs/ceremony.md §7.5): under the rule, an approved upgrade that can
// never converge leaves the Head applying generation 2, carrying its
// approval; a rollback preflighted with --supersede 2 names alice as its
// proposer, and its apply is refused while the only approval is the stuck
// upgrade's (it does not carry over); alice proposes it while the Head is
// applying (the documented exception), bob approves, and the supersede
// commits generation 3 recording the approval and the superseded
// generation, as its receipt does; the chain audits with generation 2
// declared superseded (receipts.Audit). Cases: the install turned the rule
// on and the stuck upgrade keeps it, or turns it off (then only the
// applying Head's approval makes the supersede need one); or the install
// was without the rule, the stuck upgrade turned it on (--approval
// two-person) and the supersede turns it off (--approval none): generation
// 3 carries an approval and no policy after generation 1 without the rule,
// which the chain accepts because generation 3 superseded the generation
// that had the rule on (issue #32: `receipt audit` called it tamper).
func TestSupersedeUnderTheRule(t *testing.T) {
	for _, c := range []supersedeCase{
		{"the stuck upgrade keeps the rule", deploy.ApprovalTwoPerson, "", deploy.ApprovalTwoPerson, "", deploy.ApprovalTwoPerson},
		{"the stuck upgrade turns the rule off", deploy.ApprovalTwoPerson, deploy.ApprovalNone, "", "", ""},
		{"the stuck upgrade turns the rule on, the supersede off", "", deploy.ApprovalTwoPerson, deploy.ApprovalTwoPerson, deploy.ApprovalNone, ""},
	} {
		t.Run(c.name, func(t *testing.T) { supersedeUnderTheRule(t, c) })
	}
}

// supersedeCase is one case of TestSupersedeUnderTheRule: the install's
// --approval, the stuck upgrade's (leaving stuckPolicy on its Head), and
// the supersede's (leaving policy on generation 3).
type supersedeCase struct {
	name, install, stuckFlag, stuckPolicy, flag, policy string
}

// supersedeUnderTheRule runs one case of TestSupersedeUnderTheRule.
func supersedeUnderTheRule(t *testing.T, c supersedeCase) {
	p := newTwoPerson(t)
	v300 := release(t, "v3.0.0", p.ns, "")
	pf1, path1 := p.preflight(v300, deploy.TransitionInstall, c.install, deploy.ExpectedHead{})
	if c.install != "" {
		p.approve(path1)
	}
	if _, err := p.apply(pf1); err != nil {
		t.Fatalf("apply of the install: %v", err)
	}
	h1 := headOf(t, p.ns)
	stuckPF, stuckPath := p.preflight(neverConverges(t, p.ns, "3.0.5"), deploy.TransitionUpgrade, c.stuckFlag, h1.Expected())
	p.approve(stuckPath)
	short := p.alice
	short.Timeout = 2 * time.Second
	if _, err := deploy.RunApply(context.Background(), short, deploy.ApplyRequest{Preflight: stuckPF.Record}); !fail.Is(err, fail.Unavailable) {
		t.Fatalf("apply of the approved upgrade that never converges: %v (class %v), want unavailable", err, fail.ClassOf(err))
	}
	stuck := headOf(t, p.ns)
	if stuck.Phase != deploy.PhaseApplying || stuck.Generation != 2 || stuck.ApprovalPolicy != c.stuckPolicy || stuck.Approval == nil || stuck.Approval.Approver != "bob" {
		t.Fatalf("head after the stuck upgrade: generation %d %s policy %q approval %+v, want 2 applying, %q, approved by bob", stuck.Generation, stuck.Phase, stuck.ApprovalPolicy, stuck.Approval, c.stuckPolicy)
	}

	sup, err := deploy.RunPreflight(context.Background(), p.alice, deploy.PreflightRequest{Dir: v300, Transition: deploy.TransitionRollback,
		Expected: stuck.Expected(), Supersede: stuck.Generation, Approval: c.flag, Out: filepath.Join(t.TempDir(), "supersede.json")})
	if err != nil {
		t.Fatalf("preflight --supersede 2 --approval %q: %v", c.flag, err)
	}
	if s := sup.Record.Command.Supersedes; sup.Record.Proposer != "alice" || sup.Record.Command.Approval != c.policy || s == nil || s.Generation != 2 || s.PreflightDigest != stuckPF.Record.SelfDigest {
		t.Fatalf("supersede record: proposer %q approval %q supersedes %+v, want alice, %q, generation 2", sup.Record.Proposer, sup.Record.Command.Approval, s, c.policy)
	}
	p.refusedNoHeadWrite(sup, "is for preflight "+stuckPF.Record.SelfDigest)

	// Proposed while the Head applies generation 2, approved, applied.
	prop, err := approval.Propose(context.Background(), p.aliceC, approval.ProposeRequest{Record: sup.Path})
	if err != nil || prop.Outcome != "replaced" || prop.Replaced == nil || prop.Replaced.PreflightDigest != stuckPF.Record.SelfDigest {
		t.Fatalf("alice proposes the supersede while generation 2 applies: %+v, %v; want the stuck upgrade's approval replaced", prop, err)
	}
	p.approve(sup.Path) // a replay of the proposal, then bob's approval
	res, err := p.apply(sup)
	if err != nil || res.Outcome != "committed" || res.Generation != 3 {
		t.Fatalf("apply of the approved supersede: %+v %v", res, err)
	}
	h3 := headOf(t, p.ns)
	p.approvedHead(h3, c.policy, sup.Record)
	ss := h3.Transition.Supersedes
	if len(ss) != 1 || h3.Current.Deployment != h1.Current.Deployment {
		t.Fatalf("head after the supersede: supersedes %+v current %+v, want one entry and %+v", ss, h3.Current.Deployment, h1.Current.Deployment)
	}
	want := receipts.Superseded{Generation: 2, Kind: deploy.TransitionUpgrade, Version: "3.0.5", CommandDigest: stuckPF.Record.CommandDigest,
		PreflightDigest: stuckPF.Record.SelfDigest, MutationID: stuck.Transition.MutationID, At: ss[0].At}
	if ss[0] != want {
		t.Fatalf("head after the supersede: supersedes %+v, want %+v", ss[0], want)
	}
	if r := readReceipt(t, p.receipt(3)); !slices.Equal(r.Transition.Supersedes, ss) {
		t.Fatalf("receipt 3: supersedes %+v, want the Head's %+v", r.Transition.Supersedes, ss)
	}
	if notes := p.audit(2); !strings.Contains(notes, "generation 2 (upgrade 3.0.5, preflight "+stuckPF.Record.SelfDigest+") has no receipt") {
		t.Fatalf("audit notes %q do not declare generation 2 superseded", notes)
	}
}
