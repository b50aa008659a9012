package operation

import "github.com/qinglong/kubectl-ql3/internal/manifestaudit"

// Names the reviewed operation uses (ADR-0145 §5 and the choices recorded in
// docs/operation-audit.md).
const (
	// Port is the HTTPS port of the Service, the container and the probes.
	Port = 8443
	// UID is the user and group the pod runs as.
	UID = 10001
	// ClientLabel marks the pods the NetworkPolicy admits (value "true").
	ClientLabel = "qinglong.io/plugin-package-management-client"
	// TLSSecret, IdentitySecret, DatabaseAuthSecret and DatabaseCASecret
	// are the only Secrets the pod may reference.
	TLSSecret          = "ql3-plugin-package-management-tls"
	IdentitySecret     = "ql3-plugin-package-management-identity"
	DatabaseAuthSecret = "ql3-postgres-package-manager-auth"
	DatabaseCASecret   = "ql3-postgres-ca"
	// PlaceholderDigest is the all-zero, fail-closed admin image digest of
	// the committed operation.
	PlaceholderDigest = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
	// SwitchEnv is the management switch; off unless "true".
	SwitchEnv = "QL3_PLUGIN_PACKAGE_MANAGEMENT_ENABLED"
)

var both = []Mode{Committed, Deployable}

// rule is a rule of the table that runs in modes.
func rule(name, summary string, modes []Mode, check func(*subject) []Finding) Rule {
	return Rule{Rule: manifestaudit.NewRule(name, summary, check), Modes: modes}
}

// rules is the rule table (docs/operation-audit.md lists the same rules in
// the same order; a test holds them together).
var rules = []Rule{
	rule("deployment", "the render holds exactly one workload, a Deployment, with one container (or one named \"management\")", both, checkDeployment),
	rule("replicas", "two replicas; one replica is reported as a single-replica development shape", both, checkReplicas),
	rule("anti-affinity", "required pod anti-affinity on kubernetes.io/hostname against the pod's own labels", both, checkAntiAffinity),
	rule("max-unavailable", "rolling update with maxUnavailable 0", both, checkMaxUnavailable),
	rule("pdb-min-available", "one PodDisruptionBudget selecting the pod, minAvailable 1", both, checkPDB),
	rule("service-account", "a dedicated ServiceAccount of the render, not \"default\"", both, checkServiceAccount),
	rule("automount-token", "automountServiceAccountToken false on the Pod and on the ServiceAccount", both, checkAutomount),
	rule("rbac", "no Role, ClusterRole, RoleBinding or ClusterRoleBinding", both, checkRBAC),
	rule("service", "a ClusterIP Service selecting the pod, one TCP port 8443 to container port 8443", both, checkService),
	rule("probes", "HTTPS httpGet liveness /livez, readiness /readyz and startup /livez probes on port 8443", both, checkProbes),
	rule("network-policy-ingress", "ingress only from same-namespace pods labelled "+ClientLabel+"=true, on port 8443", both, checkIngress),
	rule("network-policy-egress", "egress only to cluster DNS and the exact database target", both, checkEgress),
	rule("run-as-non-root", "runAsNonRoot with UID and GID 10001", both, checkRunAs),
	rule("read-only-root-filesystem", "readOnlyRootFilesystem true in every container", both, checkReadOnlyRoot),
	rule("drop-all", "capabilities drop ALL, add none, no privilege or privilege escalation", both, checkDropAll),
	rule("seccomp", "RuntimeDefault seccomp profile", both, checkSeccomp),
	rule("tls-mount", "the TLS Secret in a volume of its own, mode 0440, mounted read-only", both, mountRule(TLSSecret, 0o440)),
	rule("identity-mount", "the identity Secret in a volume of its own, mode 0444, mounted read-only", both, mountRule(IdentitySecret, 0o444)),
	rule("database-ca-mount", "the database CA Secret in a volume of its own, mode 0444, mounted read-only", both, mountRule(DatabaseCASecret, 0o444)),
	rule("resources", "per replica, requests 100m CPU / 128Mi and limits 1 CPU / 512Mi", both, checkResources),
	rule("limits", "concurrency 16, peer table 512, TLS connections 32, database pool 2 where set", both, envValues(limitEnv)),
	rule("quotas", "propose 30, decide 60, inspect 600 per 60 s window, 1000 receipts where set", both, envValues(quotaEnv)),
	rule("profile", "QL3_PROFILE=cluster-admin", both, checkProfile),
	rule("absolute-paths", "TLS certificate, key and identity keyset paths absolute and inside their Secret's mount", both, checkPaths),
	rule("database-tls", "database TLS verify-full with a server name and an absolute CA file inside the CA mount", both, checkDatabaseTLS),
	rule("database-secrets", "the pod references no Secret but the TLS, identity, "+DatabaseAuthSecret+" and "+DatabaseCASecret+" Secrets", both, checkDatabaseSecrets),
	rule("credentials", "no executor, admin, runtime or migration database credential, registry credential or envFrom", both, checkCredentials),
	rule("kubernetes-token", "no Kubernetes API token projected, mounted or rendered", both, checkToken),
	rule("image-digest", "every container image pinned by sha256 digest", both, checkImageDigest),
	rule("admin-image-placeholder", "committed: the management image carries the all-zero placeholder digest; deployable: no image does", both, checkPlaceholder),
	rule("management-switch", "deployable: "+SwitchEnv+"=true", []Mode{Deployable}, checkSwitch),
	rule("example-in-kustomization", "no committed example (*.example.yaml) is read by the render or listed by any kustomization", both, checkExamples),
	{Rule: manifestaudit.NewRule("operation-referenced", "committed: no kustomization outside the operation references it (needs --repo-root)", checkReferenced), Modes: []Mode{Committed}, NeedsRepo: true},
}
