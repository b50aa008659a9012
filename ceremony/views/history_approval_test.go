package views

import (
	"strings"
	"testing"
)

// history shows who proposed and who approved each generation (the
// receipts' two-person members), and flags a generation that moved
// without an approval while the previous one had the rule on — read from
// the receipt vectors (docs/receipts.md §2.6).
func TestHistoryApprovals(t *testing.T) {
	rep, err := History("../../testdata/vectors/receipts/chain-approval", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range rep.Entries {
		got = append(got, strings.Join([]string{e.ApprovalPolicy, e.Proposer, e.Approver}, "/"))
		if e.Unapproved {
			t.Errorf("generation %d flagged unapproved in an approved chain", e.Generation)
		}
	}
	// The vector starts at generation 2, so the chain misses generation 1;
	// nothing else is wrong with it.
	if want := "//,two-person/alice/bob,/alice/bob"; strings.Join(got, ",") != want || len(rep.Chain.Reasons) != 1 || !strings.Contains(rep.Chain.Reasons[0], "generation 1 is missing") {
		t.Fatalf("approved chain: %q, want %q (chain reasons %q)", strings.Join(got, ","), want, rep.Chain.Reasons)
	}
	rep, err = History("../../testdata/vectors/receipts/chain-approval-missing", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	last := rep.Entries[len(rep.Entries)-1]
	if !last.Unapproved || last.Approver != "" || !strings.Contains(strings.Join(rep.Chain.Reasons, "\n"), "generation 4 moved without an approval while the two-person rule was on") {
		t.Fatalf("unapproved move: entry %+v, err %v", last, rep.Err())
	}
}
