package delivery

import (
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/strictjson"
)

// Verdict is what the PodTemplate's current annotations mean for a delivery.
type Verdict string

const (
	// Advance: the PodTemplate carries the delivery's exact predecessor
	// (or, for a first delivery, no credential annotation) and a lower
	// generation: publish may proceed.
	Advance Verdict = "advance"
	// Replay: the PodTemplate already carries exactly this delivery.
	Replay Verdict = "replay"
)

// Judge compares the PodTemplate annotations ann with delivery d stamped as
// want (StampOf), before any Secret write (ADR-0239 §2 step 2). It is
// Replay when all five annotations equal want; Advance when the template
// carries none of them and d has no predecessor, or carries d's exact
// predecessor at a generation below d's. Otherwise a conflict (3) that
// names the credential ids and generations, never a token digest; a
// template with some but not all of the five, or an unreadable
// generation, is tamper (5).
func Judge(d *Delivery, want Stamp, ann map[string]string) (Verdict, error) {
	n := 0
	for _, k := range Annotations {
		if _, ok := ann[k]; ok {
			n++
		}
	}
	if n == 0 {
		if d.Predecessor != nil {
			return "", fail.Errorf(fail.Conflict, "the Worker PodTemplate carries no credential yet, but delivery %q names the predecessor %q: a first delivery has predecessorCredentialId null; nothing was written", d.DeliveryID, *d.Predecessor)
		}
		return Advance, nil
	}
	if n != len(Annotations) {
		return "", fail.Errorf(fail.Tamper, "the Worker PodTemplate carries %d of the %d credential annotations: they were edited outside kubectl ql3 worker publish; inspect the Deployment; nothing was written", n, len(Annotations))
	}
	cur, err := ParseGeneration(ann[AnnotationGeneration])
	if err != nil {
		return "", fail.Errorf(fail.Tamper, "the Worker PodTemplate annotation %s: %v; nothing was written", AnnotationGeneration, err)
	}
	same := true
	for _, k := range Annotations {
		if ann[k] != want[k] {
			same = false
		}
	}
	switch {
	case same:
		return Replay, nil
	case ann[AnnotationDeliveryID] == d.DeliveryID:
		return "", fail.Errorf(fail.Conflict, "the Worker PodTemplate carries delivery %q with other values (credential %q, generation %d): a delivery id names one delivery only; nothing was written", d.DeliveryID, strictjson.Clip(ann[AnnotationCredentialID]), cur)
	case d.Predecessor == nil:
		return "", fail.Errorf(fail.Conflict, "the Worker PodTemplate already carries credential %q (generation %d), but delivery %q is a first delivery (predecessorCredentialId null); nothing was written", strictjson.Clip(ann[AnnotationCredentialID]), cur, d.DeliveryID)
	case ann[AnnotationCredentialID] != *d.Predecessor:
		return "", fail.Errorf(fail.Conflict, "the Worker PodTemplate carries credential %q (generation %d), not delivery %q's predecessor %q: another rotation moved it; nothing was written", strictjson.Clip(ann[AnnotationCredentialID]), cur, d.DeliveryID, *d.Predecessor)
	case d.Generation <= cur:
		return "", fail.Errorf(fail.Conflict, "delivery %q's deploymentGeneration %d is not above the PodTemplate's %d; nothing was written", d.DeliveryID, d.Generation, cur)
	}
	return Advance, nil
}

// Carries reports whether ann holds exactly the five values of want.
func Carries(ann map[string]string, want Stamp) bool {
	for _, k := range Annotations {
		if v, ok := ann[k]; !ok || v != want[k] {
			return false
		}
	}
	return true
}
