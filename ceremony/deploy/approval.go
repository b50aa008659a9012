package deploy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// The two-person rule's policies (preflight --approval, docs/approval.md
// §8): ApprovalTwoPerson is the only value command.approval and the Head's
// approvalPolicy take; ApprovalNone is the flag's way to turn it off (the
// member is then absent).
const (
	ApprovalTwoPerson = receipts.PolicyTwoPerson
	ApprovalNone      = "none"
)

// HeadApproval is the approval a transition was applied under, as the
// apply gate read it (gate.Check); the receipt carries it as is.
type HeadApproval = receipts.Approval

// headRequiresApproval says whether a transition from head needs an
// approval because of head: its policy is on, or it is applying a
// transition that carried one (its previous committed Head had the rule on;
// a supersede of it must not drop the rule).
func headRequiresApproval(head *Head) bool {
	return head != nil && (head.ApprovalPolicy == ApprovalTwoPerson || (head.Phase == PhaseApplying && head.Approval != nil))
}

// ApprovalRequired says whether the transition rec asks for, from head,
// needs a second person's approval: the Head has the rule on, or the
// record turns it on (so turning it off is itself approved).
func ApprovalRequired(head *Head, c Command) bool {
	return headRequiresApproval(head) || c.Approval == ApprovalTwoPerson
}

// CheckApprovalFlag is the rule of preflight's --approval: "",
// two-person or none.
func CheckApprovalFlag(flag string) error {
	if flag != "" && flag != ApprovalTwoPerson && flag != ApprovalNone {
		return fail.Errorf(fail.Invalid, "--approval %q: want %q or %q", flag, ApprovalTwoPerson, ApprovalNone)
	}
	return nil
}

// approvalPolicy is the record's command.approval for preflight
// --approval flag ("" keeps the Head's policy; no Head: none).
func approvalPolicy(head *Head, flag string) (string, error) {
	if err := CheckApprovalFlag(flag); err != nil {
		return "", err
	}
	if flag == ApprovalTwoPerson || (flag == "" && head != nil && head.ApprovalPolicy == ApprovalTwoPerson) {
		return ApprovalTwoPerson, nil
	}
	return "", nil
}

// preflightProposer is the record's proposer: when the transition needs an
// approval, the caller as the API server authenticated them
// (SelfSubjectReview); else "".
func (o *Options) preflightProposer(ctx context.Context, head *Head, c Command) (string, error) {
	if !ApprovalRequired(head, c) {
		return "", nil
	}
	me, err := gate.WhoAmI(ctx, o.Cluster.Clientset())
	if err != nil {
		return "", err
	}
	o.say("preflight: the two-person rule applies to this transition: proposer %s (as the API server authenticated you); propose it with kubectl ql3 propose --preflight FILE", me)
	return me, nil
}

// approvalGate is apply's gate (docs/ceremony.md §6.2), before the Head is
// acquired: when the transition from head needs an approval, the approval
// object must approve exactly this record, by someone other than its
// proposer, the proposer being the record's, with the policy enforced
// (gate.Check). It returns the approval the Head records, nil when none
// is required.
func (o *Options) approvalGate(ctx context.Context, head *Head, rec *PreflightRecord) (*HeadApproval, error) {
	if !ApprovalRequired(head, rec.Command) {
		return nil, nil
	}
	ns := rec.Target.Namespace
	if rec.Proposer == "" {
		return nil, fail.Errorf(fail.Invalid, "preflight %s: the two-person rule applies to this transition but the record names no proposer: preflight again with this tool", rec.SelfDigest)
	}
	ok, err := gate.Check(ctx, o.Cluster.Clientset(), ns, rec.SelfDigest, rec.CommandDigest, rec.Command.ExpectedHead.String())
	if err != nil {
		return nil, fmt.Errorf("apply: the two-person rule applies to this transition: %w", err)
	}
	if ok.Proposer != rec.Proposer {
		return nil, fail.Errorf(fail.Invalid, "apply: %s was proposed by %s, but the record names proposer %s: %s runs kubectl ql3 propose --preflight FILE --replace, then another person approves", gate.What(ns), ok.Proposer, rec.Proposer, rec.Proposer)
	}
	o.say("apply: approved by %s (proposed by %s; approval uid %s resourceVersion %s)", ok.Approver, ok.Proposer, ok.UID, ok.ResourceVersion)
	return &HeadApproval{Proposer: ok.Proposer, Approver: ok.Approver, UID: ok.UID, ResourceVersion: ok.ResourceVersion}, nil
}

// gateRefusal is an error of apply's gate: the Head was not acquired, so
// the record is applied again (apply --preflight), never resumed, once
// the approval is in place.
type gateRefusal struct{ error }

func (g gateRefusal) Unwrap() error { return g.error }

// isGateRefusal says whether err is apply's gate refusing.
func isGateRefusal(err error) bool {
	var g gateRefusal
	return errors.As(err, &g)
}

// checkApprovalMembers is the Head's own rule for its approval members
// (docs/head.md §2): receipts.CheckApproval, tamper on a violation.
func (h *Head) checkApprovalMembers() error {
	if err := receipts.CheckApproval(h.Generation, h.ApprovalPolicy, h.Approval); err != nil {
		return tamper("head.json: %v", err)
	}
	return nil
}

// checkApprovalIntent is the record's own rule for its approval members:
// command.approval absent or two-person; when it is two-person, a
// proposer (the transition needs an approval).
func checkApprovalIntent(p *PreflightRecord) error {
	switch {
	case p.Command.Approval != "" && p.Command.Approval != ApprovalTwoPerson:
		return fmt.Errorf("command.approval %q: want %q or absent", p.Command.Approval, ApprovalTwoPerson)
	case p.Command.Approval == ApprovalTwoPerson && p.Proposer == "":
		return fmt.Errorf("command.approval %s needs a proposer", ApprovalTwoPerson)
	}
	return nil
}

// hasFlatKeys says whether h's ConfigMap holds the flat keys and the label
// the Head policy reads (docs/head.md §1): exactly when head.json has
// approvalPolicy or approval.
func (h *Head) hasFlatKeys() bool { return h.ApprovalPolicy != "" || h.Approval != nil }

// headLabels is the Head ConfigMap's exact label set for h stored in the
// form of schema.
func headLabels(h *Head, schema string) map[string]string {
	l := map[string]string{LabelManagedBy: LabelManagedByValue, LabelHeadSchema: headSchemaLabel(schema)}
	if h.hasFlatKeys() {
		l[gate.HeadApprovalLabel] = gate.HeadApprovalLabelValue
	}
	return l
}

// flatKeys is the Head ConfigMap's data less head.json: the flat keys when
// h has them (each head.json's member of the same meaning; "" for an absent
// approvalPolicy or approval), else nothing.
func (h *Head) flatKeys() map[string]string {
	d := map[string]string{}
	if !h.hasFlatKeys() {
		return d
	}
	d[gate.HeadKeyPhase] = h.Phase
	d[gate.HeadKeyGeneration] = strconv.FormatInt(h.Generation, 10)
	d[gate.HeadKeyPreflightDigest] = h.Transition.PreflightDigest
	d[gate.HeadKeyCommandDigest] = h.Transition.CommandDigest
	d[gate.HeadKeyApprovalPolicy] = h.ApprovalPolicy
	d[gate.HeadKeyApprovalUID], d[gate.HeadKeyApprovalProposer], d[gate.HeadKeyApprovalApprover] = "", "", ""
	if a := h.Approval; a != nil {
		d[gate.HeadKeyApprovalUID], d[gate.HeadKeyApprovalProposer], d[gate.HeadKeyApprovalApprover] = a.UID, a.Proposer, a.Approver
	}
	return d
}

// checkFlat is the ConfigMap's rule for its labels and data besides
// head.json: exactly headLabels(h), and exactly h's flat keys with their
// values (a Head whose flat keys say other than its head.json is tamper:
// the Head policy judged the flat keys).
func (h *Head) checkFlat(cm *corev1.ConfigMap, schema string, compressed bool) error { // compressed: head.json is not in data
	if want := headLabels(h, schema); !maps.Equal(cm.Labels, want) {
		return fmt.Errorf("labels must be exactly %v, got %v", want, cm.Labels)
	}
	want := h.flatKeys()
	if !compressed {
		want[HeadKey] = cm.Data[HeadKey]
	}
	if !slices.Equal(slices.Sorted(maps.Keys(cm.Data)), slices.Sorted(maps.Keys(want))) {
		return fmt.Errorf("data must hold exactly the keys %v, got %v", slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(cm.Data)))
	}
	for _, k := range gate.HeadKeys {
		if cm.Data[k] != want[k] {
			return fmt.Errorf("data key %q is %q, but head.json says %q", k, cm.Data[k], want[k])
		}
	}
	return nil
}
