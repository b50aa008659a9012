package pointer

import (
	"context"
	"fmt"

	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/ceremony/package/intent"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// State is what inspect found.
type State string

// The states of Status.
const (
	// StateActive: the pointer holds exactly the intent (exit 0).
	StateActive State = "active"
	// StateNotActivated: no pointer, and the intent is a first activation
	// (exit 0: activating it is safe).
	StateNotActivated State = "not-activated"
	// StateConflict: no pointer although the intent has a previous lock,
	// or a pointer holding another intent (exit 3).
	StateConflict State = "conflict"
)

// Status is inspect's report.
type Status struct {
	State   State `json:"state"`
	Pointer Ref   `json:"pointer"`
	// IntentDigest is the inspected intent's digest.
	IntentDigest string `json:"intentDigest"`
	// Active is the pointer's active.json (with its receipt) when present.
	Active *intent.Active `json:"active,omitempty"`
	// Evidence is the stage evidence, verified.
	Evidence intent.StageEvidence `json:"evidence"`
}

// Inspect reads the pointer of in's target once and decides (docs/
// package-pointer.md, "Inspect"): the cluster must be the intent's; a
// pointer that fails Check is tamper (5); the stage evidence is verified
// (unavailable 4, conflict 3); then exactly in → active; absent with a
// null previous → not activated; absent with a previous, or another
// intent → conflict (3), the Status still returned. Inspect never writes.
func Inspect(ctx context.Context, o Options, in intent.Intent) (*Status, error) {
	in, err := intent.Normalize(in)
	if err != nil {
		return nil, err
	}
	nm, _ := intent.NamingOf(in)
	id, _ := intent.Digest(in)
	w := what(nm, in.Namespace)
	if err := o.sameCluster(ctx, in); err != nil {
		return nil, err
	}
	cur, present, err := cas.Read(ctx, o.ConfigMaps, nm.Name, w)
	if err != nil {
		return nil, err
	}
	st := &Status{Pointer: Ref{Namespace: in.Namespace, Name: nm.Name, TargetDigest: nm.TargetDigest}, IntentDigest: id}
	if present {
		st.Pointer.ResourceVersion = cur.ResourceVersion
		if st.Active, err = Check(cur); err != nil {
			return nil, err
		}
	}
	if st.Evidence, err = o.verify(in); err != nil {
		return nil, err
	}
	switch {
	case present && Same(st.Active.Intent, in):
		st.State = StateActive
		return st, nil
	case !present && in.PreviousLockDigest == nil:
		st.State = StateNotActivated
		return st, nil
	case !present:
		st.State = StateConflict
		return st, fail.Errorf(fail.Conflict, "%s does not exist, but the intent (generation %d) replaces lock %s: it was not activated, and cannot be until that pointer exists", w, in.Generation, *in.PreviousLockDigest)
	}
	st.State = StateConflict
	a := st.Active.Intent
	return st, fail.Errorf(fail.Conflict, "%s holds another intent: generation %d, lock %s (intent %s); this intent (generation %d, lock %s) is not active", w, a.Generation, a.LockDigest, st.Active.Receipt.IntentDigest, in.Generation, in.LockDigest)
}

// Current reads the pointer of a target as it is, for building the next
// intent: (nil, nil) when absent; Check's error when tampered.
func Current(ctx context.Context, o Options, nm intent.Naming, ns string) (*intent.Active, string, error) {
	cur, present, err := cas.Read(ctx, o.ConfigMaps, nm.Name, what(nm, ns))
	if err != nil || !present {
		return nil, "", err
	}
	a, err := Check(cur)
	if err != nil {
		return nil, "", err
	}
	if a.Receipt.TargetDigest != nm.TargetDigest {
		return nil, "", fail.Errorf(fail.Tamper, "%s holds target %s", what(nm, ns), a.Receipt.TargetDigest)
	}
	return a, cur.ResourceVersion, nil
}

// Next is the intent that activates the stage ev after the pointer a (nil:
// the first activation) for target t.
func Next(t intent.Target, a *intent.Active, ev intent.StageEvidence) (intent.Intent, error) {
	in := intent.Intent{
		Schema: intent.Schema, ClusterIdentity: t.ClusterIdentity, Namespace: t.Namespace, ProjectID: t.ProjectID, PackageID: t.PackageID,
		Generation: 1, LockDigest: ev.LockDigest, StageReference: ev.StageReference, StageReceiptDigest: ev.StageReceiptDigest,
		AdapterEvidenceDigest: ev.AdapterEvidenceDigest, ContentDigest: ev.ContentDigest,
	}
	if a != nil {
		if a.Intent.Generation >= intent.MaxGeneration {
			return intent.Intent{}, fail.Errorf(fail.Conflict, "the pointer is at generation %d, the last one", a.Intent.Generation)
		}
		prev := a.Intent.LockDigest
		in.Generation, in.PreviousLockDigest = a.Intent.Generation+1, &prev
		if a.Intent.Evidence() == ev {
			// Already active: the active intent itself, so activate replays.
			return a.Intent, nil
		}
	}
	n, err := intent.Normalize(in)
	if err != nil {
		return intent.Intent{}, fmt.Errorf("build the intent: %w", err)
	}
	return n, nil
}
