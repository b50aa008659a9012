package deploy

import (
	"slices"
	"strings"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// The longest values a Head's members take after the preflight, for the
// preflight's bound: an approval the apply gate will read (its approver's
// username is not known yet), and a retired object's final outcome.
const (
	boundApproverBytes = 256
	boundUIDBytes      = 36
	boundRVBytes       = 20
)

// checkHeadFits is the preflight's bound (docs/head.md §2.2), the second
// line of defence behind the lock's: the committed Head that applying rec
// leads to, every member not known yet at its longest, must fit in
// HeadMaxBytes — so a release (or a retire) too large for the Head is
// refused here, never by apply after its Head is acquired.
func (o *Options) checkHeadFits(prev *Head, ld *loaded, rec *PreflightRecord) error {
	r := *rec
	if err := r.Seal(); err != nil {
		return err
	}
	h, err := o.newApplyingHead(prev, ld, &r, strings.Repeat("0", 32))
	if err != nil {
		return err
	}
	h.Phase = PhaseCommitted
	h.Steps.Apply, h.Steps.Converge, h.Steps.FinalIdentity = h.Steps.Identity, h.Steps.Identity, h.Steps.Identity
	h.Retired = slices.Clone(h.Retired)
	for i := range h.Retired {
		h.Retired[i].Outcome = receipts.OutcomeLeftRecreated // the longest outcome
	}
	if r.Proposer != "" {
		h.Approval = &HeadApproval{Proposer: r.Proposer, Approver: strings.Repeat("x", boundApproverBytes),
			UID: strings.Repeat("u", boundUIDBytes), ResourceVersion: strings.Repeat("9", boundRVBytes)}
	}
	data, err := h.Bytes()
	if err != nil {
		return err
	}
	if len(data) > HeadMaxBytes {
		return fail.Errorf(fail.Invalid, "release %s: the Head of this %s would be %d bytes (%d objects, %d retired), over the %d-byte bound of head.json (docs/head.md §2.2): nothing written; split the release, or retire fewer objects at a time",
			ld.lock.Release.Version, rec.Command.Transition, len(data), len(h.Current.Inventory), len(h.Retired), HeadMaxBytes)
	}
	return nil
}
