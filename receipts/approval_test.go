package receipts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// approvalChain is an install without the rule, an upgrade turning it on
// (approved), then one more upgrade whose approval and policy set decides,
// then an upgrade turning it off (approved).
func approvalChain(t *testing.T, third func(*Receipt)) []*Receipt {
	t.Helper()
	ok := func(g string) *Approval {
		return &Approval{Proposer: "alice", Approver: "bob", UID: "uid-" + g, ResourceVersion: g}
	}
	r1 := newReceipt().sealed(t)
	r2 := following(r1, KindUpgrade, "3.1.0").with(func(r *Receipt) { r.ApprovalPolicy, r.Approval = PolicyTwoPerson, ok("2") }).sealed(t)
	r3 := following(r2, KindUpgrade, "3.2.0").with(func(r *Receipt) { r.ApprovalPolicy, r.Approval = PolicyTwoPerson, ok("3") }).with(third).sealed(t)
	r4 := following(r3, KindUpgrade, "3.3.0").with(func(r *Receipt) { r.ApprovalPolicy, r.Approval = "", ok("4") }).sealed(t)
	return []*Receipt{r1, r2, r3, r4}
}

// The audit's two-person rule (docs/receipts.md §2.6 and §5.2): a chain
// that turns the rule on and off with approvals passes; a generation moved
// without an approval while the rule was on — a raw Head write that
// dropped the policy to stay self-consistent — breaks the chain; a
// receipt with the rule on and no approval, or approved by its proposer,
// does not verify.
func TestAuditApprovals(t *testing.T) {
	tests := []struct {
		name  string
		third func(*Receipt)
		want  string // "" = the audit passes
		// forged: third makes a receipt Seal refuses, so generation 3 is
		// written by forge (digests recomputed, nothing checked).
		forged bool
	}{
		{"approved throughout", func(*Receipt) {}, "", false},
		{"raw write: policy and approval dropped", func(r *Receipt) { r.ApprovalPolicy, r.Approval = "", nil },
			"generation 3 moved without an approval while the two-person rule was on (generation 2 has approvalPolicy two-person)", false},
		{"policy on, no approval", func(r *Receipt) { r.Approval = nil }, "approvalPolicy two-person without an approval", true},
		{"self-approved", func(r *Receipt) { r.Approval.Approver = "alice" }, `proposer and approver are both "alice"`, true},
		{"empty approver", func(r *Receipt) { r.Approval.Approver = "" }, "approval: proposer, approver, uid and resourceVersion are required", true},
		{"another policy", func(r *Receipt) { r.ApprovalPolicy = "one-person" }, `approvalPolicy "one-person"`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if !tt.forged {
				writeChain(t, dir, approvalChain(t, tt.third))
			} else {
				rs := approvalChain(t, func(*Receipt) {})
				writeChain(t, dir, rs)
				bad := *rs[2]
				a := *bad.Approval
				bad.Approval = &a
				tt.third(&bad)
				if err := os.WriteFile(filepath.Join(dir, FileName(rs[2])), forge(t, &bad), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			rep := mustAudit(t, []string{dir}, AuditOptions{})
			got := failures(rep)
			if tt.want == "" && !rep.OK() || tt.want != "" && (rep.OK() || !strings.Contains(got, tt.want)) {
				t.Fatalf("audit OK=%v, failures:\n%s\nwant %q", rep.OK(), got, tt.want)
			}
		})
	}
}

// The chain's two-person rule (docs/receipts.md §5.2 rule 3), pure: the
// policy at the last committed generation p, at c, whether c carries an
// approval and whether c superseded generations that never committed.
// While the rule is on at p, c needs an approval, superseding or not; on
// at neither, c carries none, except a supersede: its stuck Head (which
// has no receipt) may have had the rule on — an upgrade turning it on that
// never converged — and the Head rule then required the approval
// (docs/approval.md §8), so the chain neither requires nor refuses it.
func TestApprovalRule(t *testing.T) {
	a := &Approval{Proposer: "alice", Approver: "bob", UID: "u", ResourceVersion: "1"}
	on, off := PolicyTwoPerson, ""
	for _, tt := range []struct {
		name       string
		pPolicy    string
		cPolicy    string
		approval   *Approval
		supersedes bool
		want       string // "" = the rule holds
	}{
		{"on, kept, approved", on, on, a, false, ""},
		{"on, turned off, approved", on, off, a, false, ""},
		{"on, moved without an approval", on, off, nil, false, "generation 3 moved without an approval while the two-person rule was on (generation 2 has approvalPolicy two-person)"},
		{"on, superseded, moved without an approval", on, off, nil, true, "generation 3 moved without an approval while the two-person rule was on"},
		{"on, superseded, approved", on, off, a, true, ""},
		{"off, turned on, approved", off, on, a, false, ""},
		{"off, kept off, no approval", off, off, nil, false, ""},
		{"off, kept off, an approval", off, off, a, false, "generation 3 carries an approval, but neither it nor generation 2 has the two-person rule on, and it superseded no generation"},
		{"off, superseding a stuck generation that turned it on, approved", off, off, a, true, ""},
		{"off, superseding a stuck generation without the rule, no approval", off, off, nil, true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := &Receipt{Generation: 2, ApprovalPolicy: tt.pPolicy}
			c := &Receipt{Generation: 3, ApprovalPolicy: tt.cPolicy, Approval: tt.approval}
			if tt.supersedes {
				c.Generation = 4
				c.Transition.Supersedes = []Superseded{{Generation: 3}}
			}
			got := strings.Join(approvalRule(p, c), "\n")
			if tt.supersedes {
				got = strings.ReplaceAll(got, "generation 4 ", "generation 3 ")
			}
			if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Fatalf("approvalRule: %q, want %q", got, tt.want)
			}
			if unapproved := strings.Contains(tt.want, "moved without"); MovedUnapproved(p, c) != unapproved {
				t.Fatalf("MovedUnapproved %v, want %v", !unapproved, unapproved)
			}
		})
	}
}

// An approval on a generation where the rule was never on, and that
// superseded nothing, is not one the tool writes: the chain says so.
func TestAuditApprovalWithoutRule(t *testing.T) {
	r1 := newReceipt().sealed(t)
	r2 := following(r1, KindUpgrade, "3.1.0").with(func(r *Receipt) {
		r.Approval = &Approval{Proposer: "alice", Approver: "bob", UID: "u", ResourceVersion: "1"}
	}).sealed(t)
	dir := t.TempDir()
	writeChain(t, dir, []*Receipt{r1, r2})
	rep := mustAudit(t, []string{dir}, AuditOptions{})
	if rep.OK() || !strings.Contains(failures(rep), "generation 2 carries an approval, but neither it nor generation 1 has the two-person rule on") {
		t.Fatalf("audit: %s", failures(rep))
	}
}

// The chain the Head rule writes when an upgrade turning the rule on never
// converges and a supersede turns it off again, approved: install (no
// rule), then generation 3, a rollback superseding generation 2 with an
// approval and no policy. It audits.
func TestAuditApprovedSupersedeOfARuleNeverCommitted(t *testing.T) {
	r1 := newReceipt().sealed(t)
	r3 := superseding(r1, 3, KindUpgrade, "3.1.0").with(func(r *Receipt) {
		r.Transition.Kind, r.Deployment = KindRollback, r1.Deployment // back to the install
		r.Approval = &Approval{Proposer: "alice", Approver: "bob", UID: "u", ResourceVersion: "1"}
	}).sealed(t)
	if rep := auditDir(t, r1, r3); !rep.OK() {
		t.Fatalf("audit:\n%s", failures(rep))
	}
}
