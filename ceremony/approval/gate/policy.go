package gate

import (
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
)

// PolicyName names both the ValidatingAdmissionPolicy and its binding.
const PolicyName = "kubectl-ql3-deployment-approval"

// InstallHint is what an error says when the policy is not enforced.
const InstallHint = "a cluster admin installs it with: kubectl ql3 approval policy | kubectl apply -f -"

// The validations' messages: a denial by the API server quotes one of
// them after "ValidatingAdmissionPolicy '<PolicyName>' with binding
// '<PolicyName>' denied request: ".
const (
	MsgShape    = "a deployment approval has exactly the labels app.kubernetes.io/managed-by=kubectl-ql3 and qinglong.io/approval-schema=deployment-approval-v1, the data keys schema, preflightDigest, commandDigest, expectedHead, proposer, decision, approver and reason, schema qinglong/deployment-approval@v1, a reason of at most 1024 bytes of UTF-8 without a control character (U+0000 to U+001F, U+007F to U+009F), and no binaryData or immutable"
	MsgCreate   = "a deployment approval is created pending, with an empty approver and reason, by the proposer it names (request.userInfo.username)"
	MsgUpdate   = "a deployment approval changes only once, from pending to approved or rejected, by the approver it names (request.userInfo.username), who is not its proposer and not a ServiceAccount; every other key and label stays as it was"
	keyListCEL  = "['schema', 'preflightDigest', 'commandDigest', 'expectedHead', 'proposer', 'decision', 'approver', 'reason']"
	shapeCEL    = "has(object.metadata.labels) && object.metadata.labels.size() == 2 && 'app.kubernetes.io/managed-by' in object.metadata.labels && object.metadata.labels['app.kubernetes.io/managed-by'] == 'kubectl-ql3' && 'qinglong.io/approval-schema' in object.metadata.labels && object.metadata.labels['qinglong.io/approval-schema'] == 'deployment-approval-v1' && has(object.data) && object.data.size() == 8 && " + keyListCEL + ".all(k, k in object.data) && object.data['schema'] == 'qinglong/deployment-approval@v1' && size(bytes(object.data['reason'])) <= 1024 && !object.data['reason'].matches('[\\\\x00-\\\\x1f\\\\x7f-\\\\x9f]') && (!has(object.binaryData) || object.binaryData.size() == 0) && (!has(object.immutable) || object.immutable == false)"
	createCEL   = "request.operation != 'CREATE' || (object.data['decision'] == 'pending' && object.data['approver'] == '' && object.data['reason'] == '' && object.data['proposer'] == request.userInfo.username)"
	updateCEL   = "request.operation != 'UPDATE' || (has(oldObject.data) && 'decision' in oldObject.data && oldObject.data['decision'] == 'pending' && 'proposer' in oldObject.data && (object.data['decision'] == 'approved' || object.data['decision'] == 'rejected') && object.data['approver'] == request.userInfo.username && object.data['approver'] != oldObject.data['proposer'] && !object.data['approver'].startsWith('system:serviceaccount:') && ['schema', 'preflightDigest', 'commandDigest', 'expectedHead', 'proposer'].all(k, k in oldObject.data && oldObject.data[k] == object.data[k]) && has(oldObject.metadata.labels) && oldObject.metadata.labels == object.metadata.labels)"
	nameCEL     = "object.metadata.name == '" + record.Name + "'"
	matchByName = "approval-object"
)

// Policy is the ValidatingAdmissionPolicy the tool prints
// (`kubectl ql3 approval policy`) and Check compares with the cluster's.
// Every field the API server would default is set, so the printed object
// is what a GET returns.
func Policy() *admissionv1.ValidatingAdmissionPolicy {
	fail := admissionv1.Fail
	equivalent := admissionv1.Equivalent
	scope := admissionv1.AllScopes
	return &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: PolicyName, Labels: map[string]string{record.LabelManagedBy: record.ManagedBy}},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{},
				ObjectSelector:    &metav1.LabelSelector{},
				MatchPolicy:       &equivalent,
				ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}, Scope: &scope},
				}}},
			},
			MatchConditions: []admissionv1.MatchCondition{{Name: matchByName, Expression: nameCEL}},
			Validations: []admissionv1.Validation{
				{Expression: shapeCEL, Message: MsgShape},
				{Expression: createCEL, Message: MsgCreate},
				{Expression: updateCEL, Message: MsgUpdate},
			},
		},
	}
}

// Binding binds Policy in every namespace with validationActions [Deny].
func Binding() *admissionv1.ValidatingAdmissionPolicyBinding {
	equivalent := admissionv1.Equivalent
	return &admissionv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: PolicyName, Labels: map[string]string{record.LabelManagedBy: record.ManagedBy}},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        PolicyName,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{},
				ObjectSelector:    &metav1.LabelSelector{},
				MatchPolicy:       &equivalent,
			},
		},
	}
}

// DenialPrefix starts the message of a request the policy denied.
const DenialPrefix = "ValidatingAdmissionPolicy '" + PolicyName + "' with binding '" + PolicyName + "' denied request: "
