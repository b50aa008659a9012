package stagelayout

import "github.com/qinglong/kubectl-ql3/ceremony/package/intent"

// Report is what a verified stage proves about an intent: what
// `kubectl ql3 package verify-stage -o json|yaml` prints.
type Report struct {
	// IntentDigest is the verified intent's digest.
	IntentDigest string `json:"intentDigest"`
	// Evidence is what the stage proves; it equals the intent's five
	// stage fields.
	Evidence Evidence `json:"evidence"`
	// Pointer is where the intent's active pointer lives.
	Pointer intent.Naming `json:"pointer"`
}

// Check verifies in against the layout (Verify) and reports the
// evidence, the intent's digest and where its pointer lives.
func (v *Verifier) Check(in intent.Intent) (*Report, error) {
	ev, err := v.Verify(in)
	if err != nil {
		return nil, err
	}
	rep := &Report{Evidence: ev}
	if rep.IntentDigest, err = intent.Digest(in); err != nil {
		return nil, err
	}
	if rep.Pointer, err = intent.NamingOf(in); err != nil {
		return nil, err
	}
	return rep, nil
}
