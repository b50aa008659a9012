package gate

import (
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
)

// HeadPolicyName names the second ValidatingAdmissionPolicy and its
// binding: the one that lets the deployment Head move under the
// two-person rule only as the namespace's approval object approved
// (docs/approval.md §2.2).
const HeadPolicyName = "kubectl-ql3-deployment-head"

// The Head's flat keys (docs/head.md §1): beside head.json, a Head whose
// head.json has approvalPolicy or approval also holds these data keys, each
// the value of head.json's member of the same meaning, and the label
// HeadApprovalLabel. CEL cannot parse JSON held in a string, so the Head
// policy reads these.
const (
	HeadKeyPhase            = "phase"
	HeadKeyGeneration       = "generation"
	HeadKeyPreflightDigest  = "preflightDigest"
	HeadKeyCommandDigest    = "commandDigest"
	HeadKeyApprovalPolicy   = "approvalPolicy"
	HeadKeyApprovalUID      = "approvalUID"
	HeadKeyApprovalProposer = "approvalProposer"
	HeadKeyApprovalApprover = "approvalApprover"
	// HeadApprovalLabel is on exactly the Heads that hold the flat keys:
	// the Head policy's objectSelector, so no other ConfigMap write pays
	// for the policy's parameter lookup.
	HeadApprovalLabel      = "qinglong.io/head-approval"
	HeadApprovalLabelValue = "flat-keys-v1"
	// HeadRuleOn is approvalPolicy's value when the rule is on ("" when off).
	HeadRuleOn = "two-person"
	// HeadName is the Head ConfigMap's name (ceremony/deploy.HeadName).
	HeadName = "qinglong3-deployment-head"
)

// HeadKeys is the flat key set, in docs/head.md's order.
var HeadKeys = []string{HeadKeyPhase, HeadKeyGeneration, HeadKeyPreflightDigest, HeadKeyCommandDigest,
	HeadKeyApprovalPolicy, HeadKeyApprovalUID, HeadKeyApprovalProposer, HeadKeyApprovalApprover}

// The Head policy's messages: a denial quotes one of them after
// HeadDenialPrefix.
const (
	MsgHeadDelete = "a deployment Head under the two-person rule is not deleted"
	MsgHeadClaim  = "a deployment Head under the two-person rule holds the flat keys phase, generation, preflightDigest, commandDigest, approvalPolicy, approvalUID, approvalProposer and approvalApprover, and names an approval (uid, proposer, approver: two people); a move to another transition names an approval the Head it moves from did not name"
	MsgHeadParams = "a deployment Head under the two-person rule is written only as the namespace's approval object " + record.Name + " approved it: the same uid, proposer, approver, preflightDigest and commandDigest"
)

// cel quotes names as a CEL list of strings.
func celList(names []string) string {
	return "['" + strings.Join(names, "', '") + "']"
}

// The Head policy's expressions. A Head "requires" an approval for its
// next move when its rule is on, or it is applying a transition that
// carried one (ceremony/deploy's headRequiresApproval); a Head "names" an
// approval when its rule is on or it carries one. Every write from a Head
// that requires one, or to a Head that names one, is checked against the
// approval object — the commit and resume of an approved transition too, so
// that the Head's last write proves its claim (docs/approval.md §2.2). A
// write keeps the move when generation, both digests and every approval
// key stay; any other write names an approval no earlier Head named.
var (
	oldRequiresCEL = "oldObject != null && has(oldObject.data) && 'approvalPolicy' in oldObject.data && (oldObject.data['approvalPolicy'] == 'two-person' || ('phase' in oldObject.data && oldObject.data['phase'] == 'applying' && 'approvalUID' in oldObject.data && oldObject.data['approvalUID'] != ''))"
	newNamesCEL    = "object != null && has(object.data) && (('approvalPolicy' in object.data && object.data['approvalPolicy'] == 'two-person') || ('approvalUID' in object.data && object.data['approvalUID'] != ''))"
	sameMoveCEL    = "oldObject != null && has(oldObject.data) && " +
		celList([]string{HeadKeyGeneration, HeadKeyPreflightDigest, HeadKeyCommandDigest, HeadKeyApprovalPolicy, HeadKeyApprovalUID, HeadKeyApprovalProposer, HeadKeyApprovalApprover}) +
		".all(k, k in oldObject.data && oldObject.data[k] == object.data[k])"
	freshUIDCEL  = "oldObject == null || !has(oldObject.data) || !('approvalUID' in oldObject.data) || oldObject.data['approvalUID'] != object.data['approvalUID']"
	headNameCEL  = "(request.operation == 'DELETE' ? oldObject.metadata.name : object.metadata.name) == '" + HeadName + "'"
	underRuleCEL = "(" + oldRequiresCEL + ") || (" + newNamesCEL + ")"
	headDelCEL   = "request.operation != 'DELETE'"
	headClaimCEL = "request.operation == 'DELETE' || (has(object.data) && " + celList(HeadKeys) + ".all(k, k in object.data) && object.data['approvalUID'] != '' && object.data['approvalProposer'] != '' && object.data['approvalApprover'] != '' && object.data['approvalProposer'] != object.data['approvalApprover'] && ((" + sameMoveCEL + ") || (" + freshUIDCEL + ")))"
	headParamCEL = "request.operation == 'DELETE' || (has(params.data) && ['decision', 'proposer', 'approver', 'preflightDigest', 'commandDigest'].all(k, k in params.data) && params.data['decision'] == 'approved' && params.metadata.uid == object.data['approvalUID'] && params.data['proposer'] == object.data['approvalProposer'] && params.data['approver'] == object.data['approvalApprover'] && params.data['preflightDigest'] == object.data['preflightDigest'] && params.data['commandDigest'] == object.data['commandDigest'])"
)

// HeadPolicy is the ValidatingAdmissionPolicy on the deployment Head
// (`kubectl ql3 approval policy` prints it after Policy): its parameter is
// the approval object of the Head's namespace, read by the API server.
// Every field the API server would default is set.
func HeadPolicy() *admissionv1.ValidatingAdmissionPolicy {
	fail := admissionv1.Fail
	equivalent := admissionv1.Equivalent
	scope := admissionv1.NamespacedScope
	return &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: HeadPolicyName, Labels: map[string]string{record.LabelManagedBy: record.ManagedBy}},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			ParamKind:     &admissionv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"},
			MatchConstraints: &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{},
				ObjectSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{HeadApprovalLabel: HeadApprovalLabelValue}},
				MatchPolicy:       &equivalent,
				ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update, admissionv1.Delete},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}, Scope: &scope},
				}}},
			},
			MatchConditions: []admissionv1.MatchCondition{
				{Name: "head-object", Expression: headNameCEL},
				{Name: "under-the-rule", Expression: underRuleCEL},
			},
			Validations: []admissionv1.Validation{
				{Expression: headDelCEL, Message: MsgHeadDelete},
				{Expression: headClaimCEL, Message: MsgHeadClaim},
				{Expression: headParamCEL, Message: MsgHeadParams},
			},
		},
	}
}

// HeadBinding binds HeadPolicy in every namespace with validationActions
// [Deny]; its parameter is the approval object of the request's namespace,
// and a missing one denies (parameterNotFoundAction Deny under
// failurePolicy Fail).
func HeadBinding() *admissionv1.ValidatingAdmissionPolicyBinding {
	equivalent := admissionv1.Equivalent
	deny := admissionv1.DenyAction
	return &admissionv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: HeadPolicyName, Labels: map[string]string{record.LabelManagedBy: record.ManagedBy}},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        HeadPolicyName,
			ParamRef:          &admissionv1.ParamRef{Name: record.Name, ParameterNotFoundAction: &deny},
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{},
				ObjectSelector:    &metav1.LabelSelector{},
				MatchPolicy:       &equivalent,
			},
		},
	}
}

// HeadDenialPrefix starts the message of a Head write the Head policy
// denied.
const HeadDenialPrefix = "ValidatingAdmissionPolicy '" + HeadPolicyName + "' with binding '" + HeadPolicyName + "' denied request: "

// IsHeadDenial reports whether err is the Head policy's denial quoting msg.
func IsHeadDenial(err error, msg string) bool {
	return err != nil && strings.Contains(err.Error(), HeadDenialPrefix+msg)
}

// Policies is everything `kubectl ql3 approval policy` prints, in order.
func Policies() []any { return []any{Policy(), Binding(), HeadPolicy(), HeadBinding()} }
