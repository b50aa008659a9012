package worker

import (
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
)

// RoleName names the Role in the stage namespace and the ClusterRole: they
// grant the same to every Worker. The Role in the Worker's namespace names
// its Deployment (DeploymentRoleName); bindings add the subject's hash
// (access.BindingName).
const RoleName = "ql3-worker-credential-publisher"

// DeploymentRoleName names the Role in the Worker's namespace, whose rules
// name the Deployment: RoleName + ":" + deployment. Invalid when too long
// for its binding's name (access.MaxRoleName).
func DeploymentRoleName(deployment string) (string, error) {
	n := RoleName + ":" + deployment
	if err := access.CheckRoleName("--deployment", n); err != nil {
		return "", err
	}
	return n, nil
}

// AnnotationNote explains, on a printed Role, what RBAC cannot limit.
const AnnotationNote = access.NoteAnnotation

// Notes printed on the Roles.
const (
	CreateNote = "create on secrets cannot be limited by name (a create has no name in its URL): the holder can create any Secret in this namespace; get and update are limited to " + delivery.SecretName + ", nothing is granted on " + delivery.IdentitySecret + ". list on replicasets and pods (for the wait of publish, which polls with get and list) cannot be limited by name either: the holder can read every ReplicaSet's and pod's spec and status in this namespace, not Secrets, logs or exec."
	StageNote  = "list on secrets cannot be limited by name or label, and a stage's name is chosen per delivery: this namespace must hold stage Secrets only, never the Worker's Secrets (the stage cap counts stages with a list)."
)

// Subject is whom the bindings name (both empty: no bindings).
type Subject = access.Subject

// Needs lists every permission stage, publish and discard-stage use.
func Needs(ns, stageNS, deployment string) []access.Access {
	return []access.Access{
		{Verb: "get", Group: "apps", Resource: "deployments", Namespace: ns, Name: deployment},
		{Verb: "update", Group: "apps", Resource: "deployments", Namespace: ns, Name: deployment},
		{Verb: "get", Resource: "secrets", Namespace: ns, Name: delivery.SecretName},
		{Verb: "update", Resource: "secrets", Namespace: ns, Name: delivery.SecretName},
		{Verb: "create", Resource: "secrets", Namespace: ns},
		{Verb: "get", Resource: "secrets", Namespace: stageNS},
		{Verb: "list", Resource: "secrets", Namespace: stageNS},
		{Verb: "create", Resource: "secrets", Namespace: stageNS},
		{Verb: "delete", Resource: "secrets", Namespace: stageNS},
		{Verb: "get", Resource: "namespaces", Name: "kube-system"},
		{Verb: "list", Group: "apps", Resource: "replicasets", Namespace: ns},
		{Verb: "list", Resource: "pods", Namespace: ns},
	}
}

// RBAC is the least privilege of the worker commands for Deployment
// deployment in ns with stages in stageNS (docs/worker.md, "worker rbac"):
// in ns, get/update on the credential Secret and the Deployment by name,
// create on Secrets and list on ReplicaSets and pods (publish --wait); in stageNS, get/list/create/delete on Secrets;
// cluster-wide, get on the kube-system Namespace (the cluster identity).
// No patch, watch, Deployment create/delete, pods/exec, and nothing on
// ql3-worker-identity. stageNS must differ from ns: the stage rules cannot
// be limited by name, and in ns they would reach the identity Secret.
func RBAC(ns, stageNS, deployment string, sub Subject) ([]any, error) {
	if err := CheckStageNamespace(ns, stageNS); err != nil {
		return nil, err
	}
	depRole, err := DeploymentRoleName(deployment)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{LabelManagedBy: ManagedBy}
	role := access.Role(depRole, ns, labels, CreateNote,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "update"}, ResourceNames: []string{delivery.SecretName}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "update"}, ResourceNames: []string{deployment}},
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"replicasets"}, Verbs: []string{"list"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}})
	stage := access.Role(RoleName, stageNS, labels, StageNote,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "create", "delete"}})
	cluster := access.ClusterRole(RoleName, labels, "",
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}, ResourceNames: []string{"kube-system"}})
	out := []any{role, stage, cluster}
	for _, r := range []struct{ name, ns string }{{depRole, ns}, {RoleName, stageNS}, {RoleName, ""}} { // the two Roles, then the ClusterRole
		out = access.Bind(out, sub, r.name, r.ns, labels)
	}
	return out, nil
}
