package operation

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

// rules is the rule table (docs/operation-audit.md lists the same rules in
// the same order; a test holds them together).
var rules = []Rule{
	{Name: "deployment", Summary: "the render holds exactly one workload, a Deployment, with one container (or one named \"management\")", Modes: both, check: checkDeployment},
	{Name: "replicas", Summary: "two replicas; one replica is reported as a single-replica development shape", Modes: both, check: checkReplicas},
	{Name: "anti-affinity", Summary: "required pod anti-affinity on kubernetes.io/hostname against the pod's own labels", Modes: both, check: checkAntiAffinity},
	{Name: "max-unavailable", Summary: "rolling update with maxUnavailable 0", Modes: both, check: checkMaxUnavailable},
	{Name: "pdb-min-available", Summary: "one PodDisruptionBudget selecting the pod, minAvailable 1", Modes: both, check: checkPDB},
	{Name: "service-account", Summary: "a dedicated ServiceAccount of the render, not \"default\"", Modes: both, check: checkServiceAccount},
	{Name: "automount-token", Summary: "automountServiceAccountToken false on the Pod and on the ServiceAccount", Modes: both, check: checkAutomount},
	{Name: "rbac", Summary: "no Role, ClusterRole, RoleBinding or ClusterRoleBinding", Modes: both, check: checkRBAC},
	{Name: "service", Summary: "a ClusterIP Service selecting the pod, one TCP port 8443 to container port 8443", Modes: both, check: checkService},
	{Name: "probes", Summary: "HTTPS httpGet liveness /livez, readiness /readyz and startup /livez probes on port 8443", Modes: both, check: checkProbes},
	{Name: "network-policy-ingress", Summary: "ingress only from same-namespace pods labelled " + ClientLabel + "=true, on port 8443", Modes: both, check: checkIngress},
	{Name: "network-policy-egress", Summary: "egress only to cluster DNS and the exact database target", Modes: both, check: checkEgress},
	{Name: "run-as-non-root", Summary: "runAsNonRoot with UID and GID 10001", Modes: both, check: checkRunAs},
	{Name: "read-only-root-filesystem", Summary: "readOnlyRootFilesystem true in every container", Modes: both, check: checkReadOnlyRoot},
	{Name: "drop-all", Summary: "capabilities drop ALL, add none, no privilege or privilege escalation", Modes: both, check: checkDropAll},
	{Name: "seccomp", Summary: "RuntimeDefault seccomp profile", Modes: both, check: checkSeccomp},
	{Name: "tls-mount", Summary: "the TLS Secret in a volume of its own, mode 0440, mounted read-only", Modes: both, check: mountRule(TLSSecret, 0o440)},
	{Name: "identity-mount", Summary: "the identity Secret in a volume of its own, mode 0444, mounted read-only", Modes: both, check: mountRule(IdentitySecret, 0o444)},
	{Name: "database-ca-mount", Summary: "the database CA Secret in a volume of its own, mode 0444, mounted read-only", Modes: both, check: mountRule(DatabaseCASecret, 0o444)},
	{Name: "resources", Summary: "per replica, requests 100m CPU / 128Mi and limits 1 CPU / 512Mi", Modes: both, check: checkResources},
	{Name: "limits", Summary: "concurrency 16, peer table 512, TLS connections 32, database pool 2 where set", Modes: both, check: envValues(limitEnv)},
	{Name: "quotas", Summary: "propose 30, decide 60, inspect 600 per 60 s window, 1000 receipts where set", Modes: both, check: envValues(quotaEnv)},
	{Name: "profile", Summary: "QL3_PROFILE=cluster-admin", Modes: both, check: checkProfile},
	{Name: "absolute-paths", Summary: "TLS certificate, key and identity keyset paths absolute and inside their Secret's mount", Modes: both, check: checkPaths},
	{Name: "database-tls", Summary: "database TLS verify-full with a server name and an absolute CA file inside the CA mount", Modes: both, check: checkDatabaseTLS},
	{Name: "database-secrets", Summary: "the pod references no Secret but the TLS, identity, " + DatabaseAuthSecret + " and " + DatabaseCASecret + " Secrets", Modes: both, check: checkDatabaseSecrets},
	{Name: "credentials", Summary: "no executor, admin, runtime or migration database credential, registry credential or envFrom", Modes: both, check: checkCredentials},
	{Name: "kubernetes-token", Summary: "no Kubernetes API token projected, mounted or rendered", Modes: both, check: checkToken},
	{Name: "image-digest", Summary: "every container image pinned by sha256 digest", Modes: both, check: checkImageDigest},
	{Name: "admin-image-placeholder", Summary: "committed: the management image carries the all-zero placeholder digest; deployable: no image does", Modes: both, check: checkPlaceholder},
	{Name: "management-switch", Summary: "deployable: " + SwitchEnv + "=true", Modes: []Mode{Deployable}, check: checkSwitch},
	{Name: "example-in-kustomization", Summary: "no committed example (*.example.yaml) is read by the render or listed by any kustomization", Modes: both, check: checkExamples},
	{Name: "operation-referenced", Summary: "committed: no kustomization outside the operation references it (needs --repo-root)", Modes: []Mode{Committed}, NeedsRepo: true, check: checkReferenced},
}
