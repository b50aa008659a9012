package receipts

import "fmt"

// PolicyTwoPerson is the only value of approvalPolicy: the two-person rule
// is on after this generation (docs/approval.md §8).
const PolicyTwoPerson = "two-person"

// Approval is the approval a generation was applied under, as apply's gate
// read the approval object from the API server: who proposed, who
// approved (the usernames the API server authenticated), and the object's
// UID and resourceVersion.
type Approval struct {
	Proposer        string `json:"proposer"`
	Approver        string `json:"approver"`
	UID             string `json:"uid"`
	ResourceVersion string `json:"resourceVersion"`
}

// CheckApproval is the rule one Head or receipt can check alone
// (docs/receipts.md §2.6): policy absent or two-person; with the policy
// on, an approval (turning the rule on, or keeping it, is approved); an
// approval's four members non-empty and its proposer not its approver.
// The error names the field.
func CheckApproval(generation int64, policy string, a *Approval) error {
	switch {
	case policy != "" && policy != PolicyTwoPerson:
		return fmt.Errorf("approvalPolicy %q, want %q or absent", policy, PolicyTwoPerson)
	case policy == PolicyTwoPerson && a == nil:
		return fmt.Errorf("approvalPolicy %s without an approval: generation %d moved without the approval the two-person rule requires", policy, generation)
	case a == nil:
		return nil
	case a.Proposer == "" || a.Approver == "" || a.UID == "" || a.ResourceVersion == "":
		return fmt.Errorf("approval: proposer, approver, uid and resourceVersion are required")
	case a.Proposer == a.Approver:
		return fmt.Errorf("approval: proposer and approver are both %q: the two-person rule needs two people", a.Proposer)
	}
	return nil
}

// MovedUnapproved says whether generation c moved from p without the
// approval the two-person rule on at p required (the chain's first
// approval rule; history marks the row).
func MovedUnapproved(p, c *Receipt) bool {
	return p.ApprovalPolicy == PolicyTwoPerson && c.Approval == nil
}

// approvalRule is the chain's rule between generation p and the next
// receipt c (docs/receipts.md §5.2): while the rule is on at p, c carries
// an approval; when it is on at neither, c carries none — unless c
// superseded generations that never committed: the Head rule asks an
// approval of a supersede whose stuck Head had the rule on or carried an
// approval, and a superseded generation has no receipt to show it, so the
// chain neither requires nor refuses one there. A Head moved by a raw
// write while the rule was on is evident here.
func approvalRule(p, c *Receipt) []string {
	switch {
	case MovedUnapproved(p, c):
		return []string{fmt.Sprintf("generation %d moved without an approval while the two-person rule was on (generation %d has approvalPolicy %s)", c.Generation, p.Generation, PolicyTwoPerson)}
	case p.ApprovalPolicy == "" && c.ApprovalPolicy == "" && c.Approval != nil && len(c.Transition.Supersedes) == 0:
		return []string{fmt.Sprintf("generation %d carries an approval, but neither it nor generation %d has the two-person rule on, and it superseded no generation", c.Generation, p.Generation)}
	}
	return nil
}

// approvalUsedOnce is the chain's rule that an approval moves the Head
// once (docs/receipts.md §5.2): no two generations name the same approval
// uid. The approval object is created for one preflight, and the Head
// policy denies a move naming the uid its Head already named; a receipt
// chain reusing one shows a Head written around both.
func approvalUsedOnce(rs []audited) []string {
	first := map[string]int64{}
	var out []string
	for _, a := range rs {
		ap := a.r.Approval
		if ap == nil {
			continue
		}
		if g, seen := first[ap.UID]; seen && g != a.r.Generation {
			out = append(out, fmt.Sprintf("generation %d names approval %s, which generation %d already named: an approval moves the Head once", a.r.Generation, ap.UID, g))
			continue
		}
		first[ap.UID] = a.r.Generation
	}
	return out
}
