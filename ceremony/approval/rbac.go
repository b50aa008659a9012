package approval

import (
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// The roles `kubectl ql3 rbac --role` prints.
const (
	RoleProposer = "proposer"
	RoleApprover = "approver"
	// RoleExecutor is what apply's gate (gate.Check) needs on top of the
	// deployer's role.
	RoleExecutor = "executor-approval"
)

// Roles lists the role names RBAC takes.
var Roles = []string{RoleProposer, RoleApprover, RoleExecutor}

// RolePrefix starts every printed Role's and ClusterRole's name:
// RolePrefix + role (+ ":" + namespace for a Role).
const RolePrefix = "kubectl-ql3-approval-"

// headName is the deployment Head's name (docs/head.md §1).
const headName = "qinglong3-deployment-head"

// CreateNote is why a printed Role's create rule names no ConfigMap.
const CreateNote = "create on configmaps cannot be limited by name (a create request has no name in its URL, so RBAC ignores resourceNames for it): this Role lets its holder create any ConfigMap in the namespace. The approval policy (kubectl ql3 approval policy) still decides what an approval object may say and in whose name."

func cmRule(verbs []string, names ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: verbs, ResourceNames: names}
}

// RBAC is the least privilege of role in the control namespace ns: a Role
// there and a ClusterRole, each bound to subj when it names someone.
//
//   - proposer: get the Head and the approval object, delete the approval
//     object (to replace a stale one), create ConfigMaps;
//   - approver: get the Head, get and update the approval object;
//   - executor-approval: get the approval object, create ConfigMaps (the
//     dry-run probes of gate.Check), get the policy and its binding.
//
// The proposer's and approver's ClusterRole grants get on the kube-system
// Namespace (the cluster identity the Head is read against; the
// executor's deployer role has it already). None grants create on
// selfsubjectreviews (who am I): every authenticated user holds it through
// the default ClusterRole system:basic-user, and a role granting it again
// would not be minimal.
func RBAC(role, ns string, subj access.Subject) ([]any, error) {
	var rules []rbacv1.PolicyRule
	note := ""
	var cluster []rbacv1.PolicyRule
	switch role {
	case RoleProposer:
		rules = []rbacv1.PolicyRule{cmRule([]string{"get"}, headName, record.Name), cmRule([]string{"delete"}, record.Name), cmRule([]string{"create"})}
		note = CreateNote
	case RoleApprover:
		rules = []rbacv1.PolicyRule{cmRule([]string{"get"}, headName, record.Name), cmRule([]string{"update"}, record.Name)}
	case RoleExecutor:
		rules = []rbacv1.PolicyRule{cmRule([]string{"get"}, record.Name), cmRule([]string{"create"})}
		note = CreateNote
		cluster = append(cluster, rbacv1.PolicyRule{APIGroups: []string{"admissionregistration.k8s.io"},
			Resources: []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings"}, Verbs: []string{"get"}, ResourceNames: []string{gate.PolicyName, gate.HeadPolicyName}})
	default:
		return nil, fail.Errorf(fail.Invalid, "--role %q, want one of %q", role, Roles)
	}
	if role != RoleExecutor {
		cluster = append(cluster, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}, ResourceNames: []string{metav1.NamespaceSystem}})
	}
	name := RolePrefix + role
	if err := access.CheckRoleName("-n", name+":"+ns); err != nil {
		return nil, err
	}
	labels := map[string]string{record.LabelManagedBy: record.ManagedBy}
	out := access.Bind([]any{access.Role(name+":"+ns, ns, labels, note, rules...)}, subj, name+":"+ns, ns, labels)
	out = append(out, access.ClusterRole(name, labels, "", slices.Clip(cluster)...))
	return access.Bind(out, subj, name, "", labels), nil
}
