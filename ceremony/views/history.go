package views

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// HistoryEntry is one receipt's row of kubectl ql3 history.
type HistoryEntry struct {
	Generation  int64  `json:"generation"`
	Transition  string `json:"transition"`
	Version     string `json:"version"`
	When        string `json:"when"` // the receipt file's modification time (not bound by any digest)
	ToolVersion string `json:"toolVersion"`
	Inventory   int    `json:"inventory"`
	// Added and Retired compare the inventory with the previous
	// generation's receipt (by group, kind, namespace and name); nil when
	// that receipt is not here (PreviousKnown false).
	Added         []inventory.Identity `json:"added,omitempty"`
	Retired       []inventory.Identity `json:"retired,omitempty"`
	PreviousKnown bool                 `json:"previousKnown"`
	Signature     string               `json:"signature"` // none | unverified | verified | invalid (receipt audit)
	SignatureKey  string               `json:"signatureKey,omitempty"`
	File          string               `json:"file"`
	SelfDigest    string               `json:"selfDigest"`
	Verdict       string               `json:"verdict"`
	// Reasons are the audit's, for a receipt that failed it (as
	// kubectl ql3 receipt audit reports them).
	Reasons []string `json:"reasons,omitempty"`
	AtHead  bool     `json:"atHead,omitempty"`
	// Supersedes, on the receipt of a transition that superseded applying
	// generations, lists them (docs/ceremony.md §7.5).
	Supersedes []int64 `json:"supersedes,omitempty"`
	// Superseded, on the row of a generation that never committed (it has
	// no receipt, verdict "superseded"), is that transition as the
	// superseding receipt (or Head) records it, and SupersededBy the
	// generation that superseded it; When is then when it was superseded.
	Superseded   *receipts.Superseded `json:"superseded,omitempty"`
	SupersededBy int64                `json:"supersededBy,omitempty"`
	// The two-person rule (docs/receipts.md §2.6): the receipt's policy
	// after this generation, who proposed and who approved it; Unapproved
	// when the previous generation's receipt here has the rule on and this
	// one carries no approval (a move that bypassed the tool).
	ApprovalPolicy string `json:"approvalPolicy,omitempty"`
	Proposer       string `json:"proposer,omitempty"`
	Approver       string `json:"approver,omitempty"`
	Unapproved     bool   `json:"unapproved,omitempty"`
}

// VerdictSuperseded is the verdict of a superseded generation's row: it has
// no receipt to verify, and the superseding receipt's audit accepted that.
const VerdictSuperseded = "superseded"

// HeadMark is where the cluster's Head is (history -n).
type HeadMark struct {
	Namespace  string `json:"namespace"`
	Generation int64  `json:"generation"`
	Phase      string `json:"phase"`
	// MissingLocally are committed generations up to the Head's (those
	// it has passed, and its own once committed) whose receipt is not in
	// the directory.
	MissingLocally []int64 `json:"missingLocally,omitempty"`
	// Marked says whether a row is the Head's own receipt.
	Marked bool `json:"marked"`
	// Mismatches are local receipts that are not the ones the Head
	// records (its own receipt, or its previousReceiptDigest).
	Mismatches []string `json:"mismatches,omitempty"`
}

// HistoryReport is what `kubectl ql3 history` prints.
type HistoryReport struct {
	Dir     string `json:"dir"`
	Verdict string `json:"verdict"` // receipt audit's verdict, FAIL also when the Head flags a gap
	// Chain is receipt audit's chain verdict, FAIL also (with the reason)
	// when the Head shows a receipt missing or different here.
	Chain   receipts.ChainVerdict `json:"chain"`
	Entries []HistoryEntry        `json:"entries"`
	Head    *HeadMark             `json:"head,omitempty"`
	Note    string                `json:"note"`
}

// Err is the report's exit class: nil when the chain and every receipt
// verify (and, with a Head, none it passed is missing or different);
// tamper (5) otherwise, as kubectl ql3 receipt audit.
func (r *HistoryReport) Err() error {
	if r.Verdict == receipts.VerdictOK {
		return nil
	}
	why := slices.Clone(r.Chain.Reasons)
	for _, e := range r.Entries {
		if e.Verdict != receipts.VerdictOK && e.Verdict != VerdictSuperseded {
			why = append(why, fmt.Sprintf("%s: %s", filepath.Base(e.File), strings.Join(e.Reasons, "; ")))
		}
	}
	return fail.Errorf(fail.Tamper, "history %s: the receipt chain does not verify: %s (fetch the missing receipts from where apply published them, or audit with kubectl ql3 receipt audit)", r.Dir, strings.Join(why, "; "))
}

// History lists the receipts of dir, verified first with receipts.Audit
// (a broken chain is reported in the report and by Err, never hidden).
// Every row shows what the audit read and verified: each receipt file is
// read once, bounded, by the audit, and nothing is read again. With head
// (read from the cluster by the caller), the Head's generation is marked
// and a committed generation up to the Head's that dir lacks (or holds a
// different receipt of) fails the chain. An unreadable or empty directory
// is invalid input.
func History(dir string, head *deploy.Head, ns string) (*HistoryReport, error) {
	audit, err := receipts.Audit([]string{dir}, receipts.AuditOptions{})
	if err != nil {
		return nil, err
	}
	rep := &HistoryReport{Dir: dir, Verdict: audit.Verdict, Chain: audit.Chain, Note: audit.Note}
	byGen := map[int64]*receipts.Receipt{}
	for _, row := range audit.Receipts {
		e := HistoryEntry{File: row.File, Generation: row.Generation, Transition: row.Transition, Version: row.Version,
			SelfDigest: row.SelfDigest, Signature: row.Signature, SignatureKey: row.SignatureKey, Verdict: row.Verdict,
			Reasons: row.Reasons}
		if fi, err := os.Stat(row.File); err == nil {
			e.When = fi.ModTime().UTC().Format(time.RFC3339)
		}
		if r := row.Receipt; r != nil {
			e.ToolVersion, e.Inventory = r.Tool.Version, len(r.Inventory)
			if _, dup := byGen[r.Generation]; !dup {
				byGen[r.Generation] = r
			}
		}
		rep.Entries = append(rep.Entries, e)
	}
	for i := range rep.Entries {
		e := &rep.Entries[i]
		cur := byGen[e.Generation]
		var prev *receipts.Receipt
		if cur != nil {
			e.Supersedes = receipts.SupersededGenerations(cur.Transition)
			prev = byGen[e.Generation-1-int64(len(e.Supersedes))]
		}
		switch {
		case cur == nil:
		case e.Generation == 1:
			e.PreviousKnown, e.Added = true, cur.Inventory
		case prev != nil:
			e.PreviousKnown = true
			e.Added = inventory.Missing(cur.Inventory, prev.Inventory)
			e.Retired = inventory.Missing(prev.Inventory, cur.Inventory)
		}
		if cur != nil {
			approvalOf(e, cur, prev)
		}
	}
	rep.Entries = append(rep.Entries, supersededRows(byGen, head)...)
	if head != nil {
		rep.Head = markHead(rep, head, ns, byGen)
	}
	slices.SortStableFunc(rep.Entries, func(a, b HistoryEntry) int {
		return cmp.Or(cmp.Compare(a.Generation, b.Generation), cmp.Compare(a.File, b.File))
	})
	return rep, nil
}

// approvalOf fills e's two-person members from its receipt cur and the
// previous generation's prev (nil when not here).
func approvalOf(e *HistoryEntry, cur, prev *receipts.Receipt) {
	e.ApprovalPolicy = cur.ApprovalPolicy
	if a := cur.Approval; a != nil {
		e.Proposer, e.Approver = a.Proposer, a.Approver
	}
	e.Unapproved = prev != nil && receipts.MovedUnapproved(prev, cur)
}

// supersededRows are the rows of the generations that never committed
// and were superseded, as the receipts here (or the Head, while the
// superseding transition is applying) record them.
func supersededRows(byGen map[int64]*receipts.Receipt, head *deploy.Head) []HistoryEntry {
	var rows []HistoryEntry
	seen := map[int64]bool{}
	add := func(by int64, t receipts.Transition) {
		for _, s := range t.Supersedes {
			if seen[s.Generation] || byGen[s.Generation] != nil {
				continue
			}
			seen[s.Generation] = true
			rows = append(rows, HistoryEntry{Generation: s.Generation, Transition: s.Kind, Version: s.Version, When: s.At,
				Verdict: VerdictSuperseded, Superseded: &s, SupersededBy: by})
		}
	}
	for _, g := range slices.Sorted(maps.Keys(byGen)) {
		add(g, byGen[g].Transition)
	}
	if head != nil {
		add(head.Generation, head.Transition.Transition)
	}
	return rows
}

// markHead marks the Head's receipt among rep's entries and fails the
// chain (with a reason each) for every committed generation up to the
// Head's whose receipt is not here, and for every receipt here that is
// not the one the Head records.
func markHead(rep *HistoryReport, h *deploy.Head, ns string, byGen map[int64]*receipts.Receipt) *HeadMark {
	m := &HeadMark{Namespace: ns, Generation: h.Generation, Phase: h.Phase}
	last := h.Generation - 1
	if h.Phase == deploy.PhaseCommitted {
		last = h.Generation
		if want, err := deploy.ReceiptFromHead(h); err == nil {
			if r := byGen[h.Generation]; r != nil && r.SelfDigest != want.SelfDigest {
				m.Mismatches = append(m.Mismatches, fmt.Sprintf("the receipt of generation %d here is %s, but the Head's is %s", h.Generation, r.SelfDigest, want.SelfDigest))
			}
		}
	}
	if p := h.Generation - 1 - int64(len(h.Transition.Supersedes)); p >= 1 {
		if r := byGen[p]; r != nil && r.SelfDigest != h.PreviousReceiptDigest {
			m.Mismatches = append(m.Mismatches, fmt.Sprintf("the receipt of generation %d here is %s, but the Head records previousReceiptDigest %s", p, r.SelfDigest, h.PreviousReceiptDigest))
		}
	}
	superseded := map[int64]bool{}
	for _, e := range rep.Entries {
		if e.Superseded != nil {
			superseded[e.Generation] = true
		}
	}
	var why []string
	for g := int64(1); g <= last; g++ {
		if byGen[g] != nil || superseded[g] {
			continue
		}
		m.MissingLocally = append(m.MissingLocally, g)
		if g == h.Generation {
			why = append(why, fmt.Sprintf("generation %d, at which the Head is committed, has no receipt here", g))
		} else {
			why = append(why, fmt.Sprintf("generation %d, which the Head has passed (it is at generation %d), has no receipt here", g, h.Generation))
		}
	}
	why = append(why, m.Mismatches...)
	if len(why) > 0 {
		rep.Verdict, rep.Chain.Verdict = receipts.VerdictFail, receipts.VerdictFail
		rep.Chain.Reasons = append(rep.Chain.Reasons, why...)
	}
	for i := range rep.Entries {
		if rep.Entries[i].Generation == h.Generation && byGen[h.Generation] != nil && rep.Entries[i].SelfDigest == byGen[h.Generation].SelfDigest {
			rep.Entries[i].AtHead, m.Marked = true, true
		}
	}
	return m
}
