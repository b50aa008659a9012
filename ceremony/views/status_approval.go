package views

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// ApprovalStatus is the two-person rule at the Head (docs/approval.md §9):
// the policy after this generation, the approval it was applied under, and
// the namespace's approval object as it is now (the next move's).
type ApprovalStatus struct {
	// Policy is "two-person" when the rule is on after this generation,
	// "off" otherwise.
	Policy string `json:"policy"`
	// Applied is the approval this generation was applied under, as the
	// Head records it; nil when none was needed.
	Applied *receipts.Approval `json:"applied,omitempty"`
	// Object is the approval object now; nil when absent.
	Object *ApprovalObject `json:"object,omitempty"`
}

// ApprovalObject is the validated approval object of the namespace.
type ApprovalObject struct {
	record.Approval
	UID             string `json:"uid"`
	ResourceVersion string `json:"resourceVersion"`
	// MatchesHead: proposed against exactly this Head, committed (the
	// next move's approval); false for the approval this generation was
	// applied under, or one proposed against a Head that is gone.
	MatchesHead bool `json:"matchesHead"`
}

// headBypass is the evidence in the owners of head.json (headWriters) that
// the Head was written outside the tool: an owner other than the
// tool's Head field manager, or no owner at all.
func headBypass(writers []FieldDrift) []string {
	if len(writers) == 0 {
		return []string{"no managedFields entry owns head.json (they were cleared): who wrote this Head cannot be shown"}
	}
	var out []string
	for _, w := range writers {
		if w.Manager != deploy.HeadFieldManager {
			out = append(out, fmt.Sprintf("head.json was written by field manager %q (%s %s), not by kubectl-ql3 (%q): the Head was moved outside the tool, and no approval gated that move", w.Manager, w.Operation, w.Time, deploy.HeadFieldManager))
		}
	}
	return out
}

// approvalStatus is the two-person rule at Head h of ns, nil when the
// rule is off and h records no approval (nothing more is read then); and
// the evidence that h claims an approval its object does not attest. It
// reads the approval object (a malformed one is tamper, as for every
// reader of it).
func approvalStatus(ctx context.Context, c deploy.Cluster, ns string, cm *corev1.ConfigMap, h *deploy.Head) (*ApprovalStatus, []string, error) {
	if h.ApprovalPolicy == "" && h.Approval == nil {
		return nil, nil, nil
	}
	a := &ApprovalStatus{Policy: "off", Applied: h.Approval}
	if h.ApprovalPolicy != "" {
		a.Policy = h.ApprovalPolicy
	}
	unattested, enforced, err := headAttestation(ctx, c, cm, h)
	if err != nil {
		return nil, nil, err
	}
	ocm, obj, present, err := gate.Read(ctx, c.Clientset(), ns)
	if err != nil && !fail.Is(err, fail.Tamper) {
		return nil, nil, fmt.Errorf("under the two-person rule status reads the approval object too (`kubectl ql3 rbac --role executor-approval -n %s` grants get on it): %w", ns, err)
	}
	if err != nil || !present {
		return a, unattested, err
	}
	a.Object = &ApprovalObject{Approval: obj, UID: string(ocm.UID), ResourceVersion: ocm.ResourceVersion,
		MatchesHead: obj.ExpectedHead == h.Expected().String() && h.Phase == deploy.PhaseCommitted}
	unattested = append(unattested, appliedMismatch(h, a.Object)...)
	return a, append(unattested, approvalFromAGap(h, ocm, enforced)...), nil
}

// reapplied is what an unattested approval claim means when an admin
// changed the policies on purpose.
const reapplied = "if an admin re-applied the policies then, as a new version of the tool prints them, this is expected until the next approved move; otherwise the API server's audit log says who wrote what while they were not enforced"

// approvalFromAGap: when the approval object is the one the Head says this
// generation was applied under, the approval policy must have been
// enforced on every write to it, as the gate requires (docs/approval.md
// §4 step 4): its creationTimestamp, which the API server sets, at least
// gate.AttestWindow after the policies last changed. An object created
// before — while the policy may have been off, so anyone could write it
// already approved in another person's name — does not attest the Head's
// claim, though the Head policy compared the Head with it. enforced is
// nil when the policies are not as the tool prints them (already flagged).
func approvalFromAGap(h *deploy.Head, ocm *corev1.ConfigMap, enforced *gate.Enforced) []string {
	if h.Approval == nil || enforced == nil || string(ocm.UID) != h.Approval.UID || enforced.Attested(ocm.CreationTimestamp.Time) {
		return nil
	}
	return []string{fmt.Sprintf("the Head says generation %d was applied under approval %s (proposed by %s, approved by %s), but that object was created at %s, not %s after the approval policies last changed (%s at %s), so the approval policy may not have checked who decided it (%s)",
		h.Generation, h.Approval.UID, h.Approval.Proposer, h.Approval.Approver, ocm.CreationTimestamp.UTC().Format(time.RFC3339), gate.AttestWindow, enforced.ChangedBy, enforced.ChangedAt.Format(time.RFC3339), reapplied)}
}

// headAttestation is the evidence that the approval Head h names (cm its
// ConfigMap) was not checked by the API server (docs/approval.md §9): the
// Head policy checks every write of a Head that names an approval against
// the approval object, so h's claim is attested exactly when the policies
// are in place as the tool prints them and cm's last write came at least
// gate.AttestWindow after they last changed. Read-only: it reads the
// policies and bindings (no probe), which `rbac --role executor-approval`
// grants.
func headAttestation(ctx context.Context, c deploy.Cluster, cm *corev1.ConfigMap, h *deploy.Head) ([]string, *gate.Enforced, error) {
	if h.Approval == nil {
		return nil, nil, nil
	}
	claim := fmt.Sprintf("the Head says generation %d was applied under approval %s (proposed by %s, approved by %s)", h.Generation, h.Approval.UID, h.Approval.Proposer, h.Approval.Approver)
	e, err := gate.ReadPolicies(ctx, c.Clientset())
	switch {
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		// Not allowed to read them is not evidence that they are not there.
		return nil, nil, fmt.Errorf("under the two-person rule status reads the approval policies (`kubectl ql3 rbac --role executor-approval -n %s` grants get on them): %w", cm.Namespace, err)
	case fail.Is(err, fail.Invalid):
		return []string{fmt.Sprintf("%s, but the API server does not hold the approval policies as the tool prints them (%v), so nothing attests that claim", claim, err)}, nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("under the two-person rule status reads the approval policies (`kubectl ql3 rbac --role executor-approval -n %s` grants get on them): %w", cm.Namespace, err)
	}
	written, ok := headJSONWritten(cm)
	switch {
	case !ok:
		return []string{claim + ", but no managedFields entry of the Head owns head.json with a time, so when it was written, and whether the Head policy checked that claim, cannot be told"}, &e, nil
	case !e.Attested(written):
		return []string{fmt.Sprintf("%s, but the Head was last written at %s, not %s after the approval policies last changed (%s at %s), so the Head policy may not have checked that claim",
			claim, written.Format(time.RFC3339), gate.AttestWindow, e.ChangedBy, e.ChangedAt.Format(time.RFC3339)) + " (" + reapplied + ")"}, &e, nil
	}
	return nil, &e, nil
}

// appliedMismatch: when the approval object is the very object the Head
// says this generation was applied under (same UID), it must say so too —
// approved, by the same two people, of this transition's preflight. A Head
// naming an approval the API server's object does not attest was written
// outside the tool.
func appliedMismatch(h *deploy.Head, o *ApprovalObject) []string {
	ap := h.Approval
	if ap == nil || ap.UID != o.UID {
		return nil
	}
	if o.Decision == record.Approved && o.Proposer == ap.Proposer && o.Approver == ap.Approver && o.PreflightDigest == h.Transition.PreflightDigest {
		return nil
	}
	return []string{fmt.Sprintf("the Head says generation %d was applied under approval %s (proposed by %s, approved by %s, preflight %s), but that object is %s by %q, proposed by %s, of preflight %s: an approval the API server did not attest",
		h.Generation, ap.UID, ap.Proposer, ap.Approver, h.Transition.PreflightDigest, o.Decision, o.Approver, o.Proposer, o.PreflightDigest)}
}

// headJSONWritten is when head.json was last written: the latest time of
// the managedFields entries that own it. A write that changes head.json
// moves its ownership to the writer's entry, whose time the API server
// sets to the write's; the times of other entries are whatever a client
// sent in its own managedFields (a forged entry of another manager keeps
// its time), so the object's latest time at all is not evidence of when
// head.json changed.
func headJSONWritten(cm *corev1.ConfigMap) (time.Time, bool) {
	owners, _ := headJSONOwners(cm) // unparsable fields: no owner, so no time (status reports the error)
	var last time.Time
	ok := false
	for _, mf := range owners {
		if mf.Time != nil && (!ok || mf.Time.After(last)) {
			last, ok = mf.Time.Time, true
		}
	}
	return last.UTC(), ok
}

// headJSONField is where cm holds head.json, as OwnedFields names it:
// binaryData["head.json.gz"] when it is compressed (docs/head.md §2.3),
// else data["head.json"]. An entry owning the other place owns nothing
// that is there.
func headJSONField(cm *corev1.ConfigMap) string {
	if _, ok := cm.BinaryData[deploy.HeadKeyGzip]; ok {
		return ".binaryData." + deploy.HeadKeyGzip
	}
	return ".data." + deploy.HeadKey
}

// headWriters are the managedFields entries that own head.json
// (OwnedFields, as Drift reads them). An update or apply of head.json
// moves its ownership to the writer, so the owners are its last writers.
func headWriters(cm *corev1.ConfigMap) ([]FieldDrift, error) {
	owners, err := headJSONOwners(cm)
	if err != nil {
		return nil, err
	}
	out := make([]FieldDrift, 0, len(owners))
	for _, mf := range owners {
		out = append(out, fieldOf(mf, headJSONField(cm)))
	}
	return out, nil
}

// headJSONOwners are cm's managedFields entries that own head.json where
// cm holds it (headJSONField, OwnedFields); an entry whose fields do not
// parse is an error.
func headJSONOwners(cm *corev1.ConfigMap) ([]metav1.ManagedFieldsEntry, error) {
	field := headJSONField(cm)
	var out []metav1.ManagedFieldsEntry
	for _, mf := range cm.ManagedFields {
		if mf.FieldsV1 == nil {
			continue
		}
		paths, err := OwnedFields(mf.FieldsV1.Raw)
		if err != nil {
			return nil, fmt.Errorf("head %s/%s: managedFields of %q: %w", cm.Namespace, cm.Name, mf.Manager, err)
		}
		if slices.Contains(paths, field) {
			out = append(out, mf)
		}
	}
	return out, nil
}
