package views

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"

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

// HeadWriter is a field manager that owns head.json in the Head's
// managedFields: the last writer of the Head's content.
type HeadWriter struct {
	Manager   string `json:"manager"`
	Operation string `json:"operation"`
	Time      string `json:"time,omitempty"`
}

// approvalStatus fills rep's HeadWriters and Bypass from the Head cm
// (parsed as h) and, when the rule is on at h or h records an approval,
// its Approval from the namespace's approval object (a malformed one is
// tamper, as every reader of it). Read-only.
func approvalStatus(ctx context.Context, c deploy.Cluster, rep *StatusReport, cm *corev1.ConfigMap, h *deploy.Head) error {
	var err error
	if rep.HeadWriters, err = headWriters(cm); err != nil {
		return err
	}
	switch n := len(rep.HeadWriters); {
	case n == 0:
		rep.Bypass = append(rep.Bypass, "no managedFields entry owns head.json (they were cleared): who wrote this Head cannot be shown")
	default:
		for _, w := range rep.HeadWriters {
			if w.Manager != deploy.HeadFieldManager {
				rep.Bypass = append(rep.Bypass, fmt.Sprintf("head.json was written by field manager %q (%s %s), not by kubectl-ql3 (%q): the Head was moved outside the tool, and no approval gated that move", w.Manager, w.Operation, w.Time, deploy.HeadFieldManager))
			}
		}
	}
	if h.ApprovalPolicy == "" && h.Approval == nil {
		return nil
	}
	a := &ApprovalStatus{Policy: "off", Applied: h.Approval}
	if h.ApprovalPolicy != "" {
		a.Policy = h.ApprovalPolicy
	}
	ocm, obj, present, err := gate.Read(ctx, c.Clientset(), rep.Namespace)
	if err != nil && !fail.Is(err, fail.Tamper) {
		return fmt.Errorf("under the two-person rule status reads the approval object too (`kubectl ql3 rbac --role executor-approval -n %s` grants get on it): %w", rep.Namespace, err)
	}
	if err != nil {
		return err
	}
	if present {
		a.Object = &ApprovalObject{Approval: obj, UID: string(ocm.UID), ResourceVersion: ocm.ResourceVersion,
			MatchesHead: obj.ExpectedHead == h.Expected().String() && h.Phase == deploy.PhaseCommitted}
		rep.Bypass = append(rep.Bypass, appliedMismatch(h, a.Object)...)
	}
	rep.Approval = a
	return nil
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

// headWriters are the managedFields entries that own data["head.json"].
// A server-side apply or update of head.json moves its ownership to the
// writer, so the owners are its last writers.
func headWriters(cm *corev1.ConfigMap) ([]HeadWriter, error) {
	var out []HeadWriter
	for _, mf := range cm.ManagedFields {
		if mf.FieldsV1 == nil {
			continue
		}
		var f struct {
			Data map[string]json.RawMessage `json:"f:data"`
		}
		if err := json.Unmarshal(mf.FieldsV1.Raw, &f); err != nil {
			return nil, fmt.Errorf("head %s/%s: managedFields of %q: %w", cm.Namespace, cm.Name, mf.Manager, err)
		}
		if _, ok := f.Data["f:"+deploy.HeadKey]; !ok {
			continue
		}
		w := HeadWriter{Manager: mf.Manager, Operation: string(mf.Operation)}
		if mf.Time != nil {
			w.Time = mf.Time.UTC().Format("2006-01-02T15:04:05Z")
		}
		out = append(out, w)
	}
	return out, nil
}
