package intent

import (
	"strings"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// StageEvidence is what a stage proves about a package: the five stage
// fields an intent binds, as a stage evidence port read them.
type StageEvidence struct {
	LockDigest            string `json:"lockDigest"`
	StageReference        string `json:"stageReference"`
	StageReceiptDigest    string `json:"stageReceiptDigest"`
	AdapterEvidenceDigest string `json:"adapterEvidenceDigest"`
	ContentDigest         string `json:"contentDigest"`
}

// StageVerifier is the stage evidence port (ADR-0139 §3): the publisher
// calls it on every inspect and again before and after a pointer write,
// and never fetches, caches or guesses a stage itself. Verify returns the
// evidence equal to the intent's stage fields, or an error of class
// fail.Unavailable (the evidence cannot be read; rerunning is safe),
// fail.Conflict (the evidence differs from the intent) or fail.Invalid
// (bad arguments). ceremony/package/stagelayout implements it over an OCI layout.
type StageVerifier interface {
	Verify(Intent) (StageEvidence, error)
}

// Evidence is the intent's own five stage fields.
func (in Intent) Evidence() StageEvidence {
	return StageEvidence{
		LockDigest:            in.LockDigest,
		StageReference:        in.StageReference,
		StageReceiptDigest:    in.StageReceiptDigest,
		AdapterEvidenceDigest: in.AdapterEvidenceDigest,
		ContentDigest:         in.ContentDigest,
	}
}

// CompareEvidence is the exact comparison of an intent's stage fields
// with evidence; any difference is fail.Conflict naming every differing
// field.
func CompareEvidence(in Intent, ev StageEvidence) error {
	want := in.Evidence()
	var diff []string
	for _, f := range []struct{ name, intent, evidence string }{
		{"lockDigest", want.LockDigest, ev.LockDigest},
		{"stageReference", want.StageReference, ev.StageReference},
		{"stageReceiptDigest", want.StageReceiptDigest, ev.StageReceiptDigest},
		{"adapterEvidenceDigest", want.AdapterEvidenceDigest, ev.AdapterEvidenceDigest},
		{"contentDigest", want.ContentDigest, ev.ContentDigest},
	} {
		if f.intent != f.evidence {
			diff = append(diff, f.name+": intent "+f.intent+", stage "+f.evidence)
		}
	}
	if len(diff) > 0 {
		return fail.Errorf(fail.Conflict, "stage evidence: the stage differs from the intent (%s): %s", in, strings.Join(diff, "; "))
	}
	return nil
}
