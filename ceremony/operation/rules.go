package operation

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/qinglong/kubectl-ql3/inventory"
)

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

func checkDeployment(s *subject) []Finding {
	var out []Finding
	switch n := len(s.deployments); {
	case n == 0:
		out = append(out, Finding{Expected: "one Deployment", Found: "none"})
	case n > 1:
		for _, d := range s.deployments {
			out = append(out, at(d, "", "the only Deployment of the render", fmt.Sprintf("one of %d Deployments", n)))
		}
	}
	for _, w := range s.workloads {
		out = append(out, at(w, "", "no workload besides the management Deployment", w.GetKind()))
	}
	if s.decodeErr != nil {
		out = append(out, at(s.deployments[0], "", "a Deployment the API server accepts", s.decodeErr.Error()))
	}
	if s.dep != nil && s.mgmt < 0 {
		var names []string
		for _, c := range s.dep.Spec.Template.Spec.Containers {
			names = append(names, c.Name)
		}
		out = append(out, at(s.depU, podPath+".containers", fmt.Sprintf("one container, or one named %q", ManagementContainer), fmt.Sprintf("%q", names)))
	}
	return out
}

func checkReplicas(s *subject) []Finding {
	if s.dep == nil {
		return nil
	}
	r := s.dep.Spec.Replicas
	const dev = ": a single-replica development shape, not production HA evidence"
	switch {
	case r == nil:
		return []Finding{at(s.depU, "spec.replicas", "2", "<unset> (1)"+dev)}
	case *r == 1:
		return []Finding{at(s.depU, "spec.replicas", "2", "1"+dev)}
	case *r != 2:
		return []Finding{at(s.depU, "spec.replicas", "2", fmt.Sprint(*r))}
	}
	return nil
}

// development reports whether the rules a development patch may remove
// (anti-affinity, PodDisruptionBudget) are waived: the replicas rule already
// reports the shape.
func (s *subject) development() bool { return s.shape() == Development }

func checkAntiAffinity(s *subject) []Finding {
	p := s.pod()
	if p == nil || s.development() {
		return nil
	}
	const where = podPath + ".affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"
	var found []string
	if p.Affinity != nil && p.Affinity.PodAntiAffinity != nil {
		for _, t := range p.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			own := len(t.Namespaces) == 0 && t.NamespaceSelector == nil && s.selects(t.LabelSelector)
			if t.TopologyKey == corev1.LabelHostname && own {
				return nil
			}
			found = append(found, fmt.Sprintf("topologyKey %q, selects own pods: %t", t.TopologyKey, own))
		}
	}
	f := "<unset>"
	if len(found) > 0 {
		f = strings.Join(found, "; ")
	}
	return []Finding{at(s.depU, where, "a term with topologyKey kubernetes.io/hostname whose labelSelector selects the pod's own labels", f)}
}

func checkMaxUnavailable(s *subject) []Finding {
	if s.dep == nil {
		return nil
	}
	st := s.dep.Spec.Strategy
	if st.Type != "" && st.Type != "RollingUpdate" {
		return []Finding{at(s.depU, "spec.strategy.type", "RollingUpdate with maxUnavailable 0", string(st.Type))}
	}
	if st.RollingUpdate == nil || st.RollingUpdate.MaxUnavailable == nil {
		return []Finding{at(s.depU, "spec.strategy.rollingUpdate.maxUnavailable", "0", "<unset> (25%)")}
	}
	if v := *st.RollingUpdate.MaxUnavailable; !isZero(v) {
		return []Finding{at(s.depU, "spec.strategy.rollingUpdate.maxUnavailable", "0", v.String())}
	}
	return nil
}

func isZero(v intstr.IntOrString) bool {
	return v.Type == intstr.Int && v.IntVal == 0 || v.Type == intstr.String && v.StrVal == "0%"
}

func checkPDB(s *subject) []Finding {
	if s.dep == nil {
		return nil
	}
	var out []Finding
	pdbs := s.pdbs(&out)
	if len(pdbs) == 0 {
		if s.development() {
			return out
		}
		return append(out, at(s.depU, "spec.template.metadata.labels", "a PodDisruptionBudget selecting the pod with minAvailable 1", "none"))
	}
	for i, d := range pdbs {
		if i > 0 {
			out = append(out, at(d.u, "spec.selector", "the only PodDisruptionBudget selecting the pod", fmt.Sprintf("one of %d", len(pdbs))))
			continue
		}
		if d.obj.Spec.MaxUnavailable != nil {
			out = append(out, at(d.u, "spec.maxUnavailable", "<unset> (minAvailable 1 instead)", d.obj.Spec.MaxUnavailable.String()))
		}
		switch m := d.obj.Spec.MinAvailable; {
		case m == nil:
			out = append(out, at(d.u, "spec.minAvailable", "1", "<unset>"))
		case m.Type != intstr.Int || m.IntVal != 1:
			out = append(out, at(d.u, "spec.minAvailable", "1", m.String()))
		}
	}
	return out
}

// serviceAccount is the pod's ServiceAccount as rendered, nil if the render
// has none of that name.
func (s *subject) serviceAccount() (*unstructured.Unstructured, string) {
	p := s.pod()
	if p == nil {
		return nil, ""
	}
	name := p.ServiceAccountName
	if name == "" {
		name = p.DeprecatedServiceAccount
	}
	for _, o := range s.sameNamespace("/ServiceAccount") {
		if o.GetName() == name {
			return o, name
		}
	}
	return nil, name
}

func checkServiceAccount(s *subject) []Finding {
	if s.pod() == nil {
		return nil
	}
	const expected = "a ServiceAccount of the operation's own (in the render, not \"default\")"
	sa, name := s.serviceAccount()
	switch {
	case name == "" || name == "default":
		return []Finding{at(s.depU, podPath+".serviceAccountName", expected, quote(name))}
	case sa == nil:
		return []Finding{at(s.depU, podPath+".serviceAccountName", expected, fmt.Sprintf("%q, which the render does not hold", name))}
	}
	return nil
}

func checkAutomount(s *subject) []Finding {
	p := s.pod()
	if p == nil {
		return nil
	}
	var out []Finding
	if a := p.AutomountServiceAccountToken; a == nil || *a {
		out = append(out, at(s.depU, podPath+".automountServiceAccountToken", "false", boolText(a)))
	}
	if sa, _ := s.serviceAccount(); sa != nil {
		v, found, err := unstructured.NestedFieldNoCopy(sa.Object, "automountServiceAccountToken")
		if b, ok := v.(bool); err != nil || !found || !ok || b {
			f := "<unset> (true)"
			if found {
				f = fmt.Sprint(v)
			}
			out = append(out, at(sa, "automountServiceAccountToken", "false", f))
		}
	}
	return out
}

func boolText(b *bool) string {
	if b == nil {
		return "<unset> (true)"
	}
	return fmt.Sprint(*b)
}

func checkRBAC(s *subject) []Finding {
	var out []Finding
	for _, k := range []string{"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"} {
		for _, o := range s.byKind["rbac.authorization.k8s.io/"+k] {
			out = append(out, at(o, "", "no RBAC object in the operation", k))
		}
	}
	return out
}

// containerPort resolves a Service target port or probe port against the
// management container's ports: 0 if a name matches none.
func (s *subject) containerPort(p intstr.IntOrString) int32 {
	if p.Type == intstr.Int {
		return p.IntVal
	}
	if c, _ := s.container(); c != nil {
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				return cp.ContainerPort
			}
		}
	}
	return 0
}

func checkService(s *subject) []Finding {
	if s.dep == nil {
		return nil
	}
	var out []Finding
	svcs := s.services(&out)
	if len(svcs) == 0 {
		return append(out, at(s.depU, "spec.template.metadata.labels", "a ClusterIP Service selecting the pod on port 8443", "none"))
	}
	for _, d := range svcs {
		sp := d.obj.Spec
		if sp.Type != "" && sp.Type != corev1.ServiceTypeClusterIP {
			out = append(out, at(d.u, "spec.type", "ClusterIP", string(sp.Type)))
		}
		if sp.ClusterIP == corev1.ClusterIPNone {
			out = append(out, at(d.u, "spec.clusterIP", "a cluster IP (not headless)", sp.ClusterIP))
		}
		if len(sp.Ports) != 1 {
			out = append(out, at(d.u, "spec.ports", "one port, 8443", fmt.Sprintf("%d ports", len(sp.Ports))))
			continue
		}
		p := sp.Ports[0]
		if p.Port != Port || (p.Protocol != "" && p.Protocol != corev1.ProtocolTCP) {
			out = append(out, at(d.u, "spec.ports[0].port", "8443/TCP", fmt.Sprintf("%d/%s", p.Port, p.Protocol)))
		}
		target := p.TargetPort
		if target.Type == intstr.Int && target.IntVal == 0 {
			target = intstr.FromInt32(p.Port) // unset: same as port
		}
		if got := s.containerPort(target); got != Port {
			out = append(out, at(d.u, "spec.ports[0].targetPort", "container port 8443", fmt.Sprintf("%s (container port %d)", target.String(), got)))
		}
	}
	return out
}

func checkProbes(s *subject) []Finding {
	c, cp := s.container()
	if c == nil {
		return nil
	}
	var out []Finding
	for _, p := range []struct {
		field, path string
		probe       *corev1.Probe
	}{
		{"livenessProbe", "/livez", c.LivenessProbe},
		{"readinessProbe", "/readyz", c.ReadinessProbe},
		{"startupProbe", "/livez", c.StartupProbe},
	} {
		where := cp + "." + p.field
		want := "httpGet HTTPS " + p.path + " on port 8443"
		switch {
		case p.probe == nil:
			out = append(out, at(s.depU, where, want, "<unset>"))
			continue
		case p.probe.HTTPGet == nil:
			out = append(out, at(s.depU, where, want, "not an httpGet probe"))
			continue
		}
		g := p.probe.HTTPGet
		if g.Scheme != corev1.URISchemeHTTPS {
			out = append(out, at(s.depU, where+".httpGet.scheme", "HTTPS", quote(string(g.Scheme))))
		}
		if g.Path != p.path {
			out = append(out, at(s.depU, where+".httpGet.path", p.path, quote(g.Path)))
		}
		if got := s.containerPort(g.Port); got != Port {
			out = append(out, at(s.depU, where+".httpGet.port", "container port 8443", fmt.Sprintf("%s (container port %d)", g.Port.String(), got)))
		}
	}
	return out
}

func checkRunAs(s *subject) []Finding {
	p := s.pod()
	if p == nil {
		return nil
	}
	var out []Finding
	psc := p.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	for _, cr := range s.containers() {
		csc := cr.c.SecurityContext
		if csc == nil {
			csc = &corev1.SecurityContext{}
		}
		nonRoot, where := effective(csc.RunAsNonRoot, psc.RunAsNonRoot, cr.path, "runAsNonRoot")
		if nonRoot == nil || !*nonRoot {
			out = append(out, at(s.depU, where, "true", boolPtr(nonRoot)))
		}
		for _, f := range []struct {
			name     string
			own, pod *int64
		}{{"runAsUser", csc.RunAsUser, psc.RunAsUser}, {"runAsGroup", csc.RunAsGroup, psc.RunAsGroup}} {
			v, where := effective(f.own, f.pod, cr.path, f.name)
			if v == nil || *v != UID {
				out = append(out, at(s.depU, where, fmt.Sprint(UID), intPtr(v)))
			}
		}
	}
	return out
}

// effective is a container security field, else the pod's, and the path of
// the one that applies (the container's when neither is set).
func effective[T any](own, pod *T, containerPath, field string) (*T, string) {
	switch {
	case own != nil:
		return own, containerPath + ".securityContext." + field
	case pod != nil:
		return pod, podPath + ".securityContext." + field
	}
	return nil, containerPath + ".securityContext." + field
}

func boolPtr(b *bool) string {
	if b == nil {
		return "<unset>"
	}
	return fmt.Sprint(*b)
}

func intPtr(i *int64) string {
	if i == nil {
		return "<unset>"
	}
	return fmt.Sprint(*i)
}

func checkReadOnlyRoot(s *subject) []Finding {
	var out []Finding
	for _, cr := range s.containers() {
		var v *bool
		if cr.c.SecurityContext != nil {
			v = cr.c.SecurityContext.ReadOnlyRootFilesystem
		}
		if v == nil || !*v {
			out = append(out, at(s.depU, cr.path+".securityContext.readOnlyRootFilesystem", "true", boolPtr(v)))
		}
	}
	return out
}

func checkDropAll(s *subject) []Finding {
	var out []Finding
	for _, cr := range s.containers() {
		sc := cr.c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		w := cr.path + ".securityContext."
		var drop, add []corev1.Capability
		if sc.Capabilities != nil {
			drop, add = sc.Capabilities.Drop, sc.Capabilities.Add
		}
		if !slices.Contains(drop, "ALL") {
			out = append(out, at(s.depU, w+"capabilities.drop", `["ALL"]`, fmt.Sprintf("%q", drop)))
		}
		if len(add) > 0 {
			out = append(out, at(s.depU, w+"capabilities.add", "<unset>", fmt.Sprintf("%q", add)))
		}
		if sc.Privileged != nil && *sc.Privileged {
			out = append(out, at(s.depU, w+"privileged", "false", "true"))
		}
		if v := sc.AllowPrivilegeEscalation; v == nil || *v {
			out = append(out, at(s.depU, w+"allowPrivilegeEscalation", "false", boolPtr(v)))
		}
	}
	return out
}

func checkSeccomp(s *subject) []Finding {
	p := s.pod()
	if p == nil {
		return nil
	}
	var pod *corev1.SeccompProfile
	if p.SecurityContext != nil {
		pod = p.SecurityContext.SeccompProfile
	}
	var out []Finding
	for _, cr := range s.containers() {
		var own *corev1.SeccompProfile
		if cr.c.SecurityContext != nil {
			own = cr.c.SecurityContext.SeccompProfile
		}
		v, where := effective(own, pod, cr.path, "seccompProfile")
		if v == nil || v.Type != corev1.SeccompProfileTypeRuntimeDefault {
			f := "<unset>"
			if v != nil {
				f = string(v.Type)
			}
			out = append(out, at(s.depU, where+".type", "RuntimeDefault", f))
		}
	}
	return out
}

// mountSecrets are the three file projections that must stay apart.
var mountSecrets = []string{TLSSecret, IdentitySecret, DatabaseCASecret}

// mountRule checks that Secret name is projected by exactly one secret
// volume of its own with the given file mode, mounted read-only, in a mount
// that is not inside another of the three projections.
func mountRule(name string, mode int32) func(*subject) []Finding {
	return func(s *subject) []Finding {
		p := s.pod()
		if p == nil {
			return nil
		}
		var out []Finding
		wantMode := fmt.Sprintf("%#o", mode)
		for i, v := range p.Volumes {
			if v.Projected == nil {
				continue
			}
			for j, src := range v.Projected.Sources {
				if src.Secret != nil && src.Secret.Name == name {
					out = append(out, at(s.depU, fmt.Sprintf("%s.volumes[%d].projected.sources[%d].secret", podPath, i, j), fmt.Sprintf("Secret %q in a secret volume of its own", name), "a projected volume"))
				}
			}
		}
		vols := s.secretVolumes(name)
		switch {
		case len(vols) == 0:
			return append(out, at(s.depU, podPath+".volumes", fmt.Sprintf("a secret volume of Secret %q, mode %s", name, wantMode), "none"))
		case len(vols) > 1:
			out = append(out, at(s.depU, vols[1].volPath, fmt.Sprintf("one volume of Secret %q", name), fmt.Sprintf("%d volumes", len(vols))))
		}
		sv := vols[0]
		sec := sv.vol.Secret
		if sec.DefaultMode == nil || *sec.DefaultMode != mode {
			f := "<unset> (0644)"
			if sec.DefaultMode != nil {
				f = fmt.Sprintf("%#o", *sec.DefaultMode)
			}
			out = append(out, at(s.depU, sv.volPath+".secret.defaultMode", wantMode, f))
		}
		for k, it := range sec.Items {
			if it.Mode != nil && *it.Mode != mode {
				out = append(out, at(s.depU, fmt.Sprintf("%s.secret.items[%d].mode", sv.volPath, k), wantMode, fmt.Sprintf("%#o", *it.Mode)))
			}
		}
		if sec.Optional != nil && *sec.Optional {
			out = append(out, at(s.depU, sv.volPath+".secret.optional", "false (fail closed)", "true"))
		}
		if len(sv.mounts) == 0 {
			return append(out, at(s.depU, podPath+".containers", fmt.Sprintf("a read-only mount of volume %q", sv.vol.Name), "none"))
		}
		others := map[string]string{}
		for _, o := range mountSecrets {
			if o == name {
				continue
			}
			for _, ov := range s.secretVolumes(o) {
				for _, m := range ov.mounts {
					others[m.m.MountPath] = o
				}
			}
		}
		for _, m := range sv.mounts {
			if !m.m.ReadOnly {
				out = append(out, at(s.depU, m.path+".readOnly", "true", "false"))
			}
			for op, o := range others {
				if within(m.m.MountPath, op) {
					out = append(out, at(s.depU, m.path+".mountPath", fmt.Sprintf("a mount apart from Secret %q's %q", o, op), m.m.MountPath))
				}
			}
		}
		return out
	}
}

// within reports whether path p is dir or inside it.
func within(p, dir string) bool {
	p, dir = path.Clean(p), path.Clean(dir)
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// resources: the per-replica budget.
var resourceBudget = []struct {
	kind, name string
	want       resource.Quantity
}{
	{"requests", "cpu", resource.MustParse("100m")},
	{"requests", "memory", resource.MustParse("128Mi")},
	{"limits", "cpu", resource.MustParse("1")},
	{"limits", "memory", resource.MustParse("512Mi")},
}

func checkResources(s *subject) []Finding {
	p := s.pod()
	if p == nil || len(p.Containers) == 0 {
		return nil
	}
	var out []Finding
	for _, b := range resourceBudget {
		var sum resource.Quantity
		var unset []string
		for _, c := range p.Containers {
			list := c.Resources.Requests
			if b.kind == "limits" {
				list = c.Resources.Limits
			}
			q, ok := list[corev1.ResourceName(b.name)]
			if !ok {
				unset = append(unset, c.Name)
				continue
			}
			sum.Add(q)
		}
		where := fmt.Sprintf("%s.containers[*].resources.%s.%s", podPath, b.kind, b.name)
		if len(p.Containers) == 1 {
			where = fmt.Sprintf("%s.containers[0].resources.%s.%s", podPath, b.kind, b.name)
		}
		switch {
		case len(unset) > 0:
			out = append(out, at(s.depU, where, b.want.String(), fmt.Sprintf("<unset> in containers %q", unset)))
		case sum.Cmp(b.want) != 0:
			out = append(out, at(s.depU, where, b.want.String(), sum.String()))
		}
	}
	return out
}

// envSetting is an environment variable and the literal value it must have.
type envSetting struct{ name, value string }

// limitEnv and quotaEnv are the configured limits and quotas
// (docs/operation-audit.md records the names).
var (
	limitEnv = []envSetting{
		{"QL3_PLUGIN_PACKAGE_MANAGEMENT_MAX_CONCURRENT_REQUESTS", "16"},
		{"QL3_PLUGIN_PACKAGE_MANAGEMENT_MAX_RATE_LIMIT_PEERS", "512"},
		{"QL3_PLUGIN_PACKAGE_MANAGEMENT_MAX_CONNECTIONS", "32"},
		{"QL3_POSTGRES_PACKAGE_MANAGER_MAX_CONNECTIONS", "2"},
	}
	quotaEnv = []envSetting{
		{"QL3_PLUGIN_PACKAGE_MANAGEMENT_QUOTA_WINDOW_MS", "60000"},
		{"QL3_PLUGIN_PACKAGE_MANAGEMENT_PROPOSE_QUOTA", "30"},
		{"QL3_PLUGIN_PACKAGE_MANAGEMENT_DECIDE_QUOTA", "60"},
		{"QL3_PLUGIN_PACKAGE_MANAGEMENT_INSPECT_QUOTA", "600"},
		{"QL3_PLUGIN_PACKAGE_MANAGEMENT_QUOTA_MAX_RECEIPTS", "1000"},
	}
)

// envValues checks, for each setting the management container carries, that
// it is a literal with exactly the reviewed value.
func envValues(settings []envSetting) func(*subject) []Finding {
	return func(s *subject) []Finding {
		env := s.env()
		var out []Finding
		for _, st := range settings {
			e, ok := env[st.name]
			if !ok {
				continue
			}
			if f, bad := literal(e, st.value); bad {
				out = append(out, at(s.depU, valuePath(e), fmt.Sprintf("%s=%s", st.name, st.value), f))
			}
		}
		return out
	}
}

// literal reports what e holds and whether it is not the literal want.
func literal(e envVar, want string) (string, bool) {
	if e.v.ValueFrom != nil {
		return "a valueFrom reference the audit cannot read", true
	}
	return quote(e.v.Value), e.v.Value != want
}

// valuePath is the path of e's value or valueFrom.
func valuePath(e envVar) string {
	if e.v.ValueFrom != nil {
		return e.path + ".valueFrom"
	}
	return e.path + ".value"
}

// requireLiteral checks that the management container sets name to want.
func requireLiteral(s *subject, name, want string) []Finding {
	c, cp := s.container()
	if c == nil {
		return nil
	}
	e, ok := s.env()[name]
	if !ok {
		return []Finding{at(s.depU, cp+".env", fmt.Sprintf("%s=%s", name, want), "<unset>")}
	}
	if f, bad := literal(e, want); bad {
		return []Finding{at(s.depU, valuePath(e), fmt.Sprintf("%s=%s", name, want), f)}
	}
	return nil
}

func checkProfile(s *subject) []Finding {
	return requireLiteral(s, "QL3_PROFILE", "cluster-admin")
}

func checkSwitch(s *subject) []Finding {
	return requireLiteral(s, SwitchEnv, "true")
}

// mountPaths are the management container's mount paths of Secret name.
func (s *subject) mountPaths(name string) []string {
	_, cp := s.container()
	var out []string
	for _, sv := range s.secretVolumes(name) {
		for _, m := range sv.mounts {
			if strings.HasPrefix(m.path, cp+".") {
				out = append(out, m.m.MountPath)
			}
		}
	}
	return out
}

// absoluteIn checks that env var name is a literal absolute clean path
// inside a mount of Secret secret.
func absoluteIn(s *subject, name, secret string) []Finding {
	c, cp := s.container()
	if c == nil {
		return nil
	}
	want := fmt.Sprintf("an absolute path inside the mount of Secret %q", secret)
	e, ok := s.env()[name]
	switch {
	case !ok:
		return []Finding{at(s.depU, cp+".env", name+": "+want, "<unset>")}
	case e.v.ValueFrom != nil:
		return []Finding{at(s.depU, valuePath(e), name+": "+want, "a valueFrom reference the audit cannot read")}
	case !path.IsAbs(e.v.Value) || path.Clean(e.v.Value) != e.v.Value:
		return []Finding{at(s.depU, e.path+".value", want, quote(e.v.Value))}
	}
	mounts := s.mountPaths(secret)
	if len(mounts) == 0 {
		return nil // the mount rule reports the missing mount
	}
	for _, m := range mounts {
		if within(e.v.Value, m) && path.Clean(e.v.Value) != path.Clean(m) {
			return nil
		}
	}
	return []Finding{at(s.depU, e.path+".value", fmt.Sprintf("a path inside %q", mounts), quote(e.v.Value))}
}

func checkPaths(s *subject) []Finding {
	var out []Finding
	out = append(out, absoluteIn(s, "QL3_PLUGIN_PACKAGE_MANAGEMENT_TLS_CERT_FILE", TLSSecret)...)
	out = append(out, absoluteIn(s, "QL3_PLUGIN_PACKAGE_MANAGEMENT_TLS_KEY_FILE", TLSSecret)...)
	out = append(out, absoluteIn(s, "QL3_PLUGIN_PACKAGE_MANAGEMENT_IDENTITY_KEYSET_FILE", IdentitySecret)...)
	return out
}

func checkDatabaseTLS(s *subject) []Finding {
	c, cp := s.container()
	if c == nil {
		return nil
	}
	out := requireLiteral(s, "QL3_POSTGRES_PACKAGE_MANAGER_TLS_MODE", "verify-full")
	env := s.env()
	if e, ok := env["QL3_POSTGRES_PACKAGE_MANAGER_TLS_SERVERNAME"]; !ok || e.v.ValueFrom == nil && e.v.Value == "" {
		out = append(out, at(s.depU, cp+".env", "QL3_POSTGRES_PACKAGE_MANAGER_TLS_SERVERNAME: the database's DNS name", "<unset>"))
	}
	if e, ok := env["QL3_POSTGRES_PACKAGE_MANAGER_ALLOW_INSECURE"]; ok && (e.v.ValueFrom != nil || e.v.Value != "false") {
		f, _ := literal(e, "false")
		out = append(out, at(s.depU, valuePath(e), "QL3_POSTGRES_PACKAGE_MANAGER_ALLOW_INSECURE <unset> or false", f))
	}
	return append(out, absoluteIn(s, "QL3_POSTGRES_PACKAGE_MANAGER_TLS_CA_FILE", DatabaseCASecret)...)
}

// secretRef is one reference from the pod to a Secret.
type secretRef struct{ name, path string }

// secretRefs are the Secrets the management pod references through secret
// and projected volumes and env valueFrom (envFrom and image pull secrets
// are the credentials rule's).
func (s *subject) secretRefs() []secretRef {
	p := s.pod()
	if p == nil {
		return nil
	}
	var out []secretRef
	for i, v := range p.Volumes {
		vp := fmt.Sprintf("%s.volumes[%d]", podPath, i)
		if v.Secret != nil {
			out = append(out, secretRef{v.Secret.SecretName, vp + ".secret.secretName"})
		}
		if v.Projected != nil {
			for j, src := range v.Projected.Sources {
				if src.Secret != nil {
					out = append(out, secretRef{src.Secret.Name, fmt.Sprintf("%s.projected.sources[%d].secret.name", vp, j)})
				}
			}
		}
	}
	for _, cr := range s.containers() {
		for i, e := range cr.c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				out = append(out, secretRef{e.ValueFrom.SecretKeyRef.Name, fmt.Sprintf("%s.env[%d].valueFrom.secretKeyRef.name", cr.path, i)})
			}
		}
	}
	return out
}

func checkDatabaseSecrets(s *subject) []Finding {
	if s.pod() == nil {
		return nil
	}
	allowed := []string{TLSSecret, IdentitySecret, DatabaseAuthSecret, DatabaseCASecret}
	var out []Finding
	auth := false
	for _, r := range s.secretRefs() {
		switch {
		case r.name == DatabaseAuthSecret:
			auth = true
		case !slices.Contains(allowed, r.name):
			out = append(out, at(s.depU, r.path, fmt.Sprintf("one of %q", allowed), quote(r.name)))
		}
	}
	if !auth {
		_, cp := s.container()
		out = append(out, at(s.depU, cp+".env", fmt.Sprintf("the database credential from Secret %q", DatabaseAuthSecret), "none"))
	}
	return out
}

// forbiddenEnvPrefixes are environment names that carry another authority's
// credential.
var forbiddenEnvPrefixes = []string{
	"QL3_POSTGRES_PACKAGE_EXECUTOR_",
	"QL3_POSTGRES_ADMIN_",
	"QL3_POSTGRES_RUNTIME_",
	"QL3_POSTGRES_MIGRATION_",
	"QL3_API_CREDENTIAL_PEPPER",
	"QL3_REGISTRY_",
	"DOCKER_CONFIG",
	"REGISTRY_AUTH_FILE",
}

func checkCredentials(s *subject) []Finding {
	p := s.pod()
	if p == nil {
		return nil
	}
	var out []Finding
	for _, cr := range s.containers() {
		for i, e := range cr.c.Env {
			for _, pre := range forbiddenEnvPrefixes {
				if strings.HasPrefix(e.Name, pre) {
					out = append(out, at(s.depU, fmt.Sprintf("%s.env[%d].name", cr.path, i), "no executor, admin, runtime, migration or registry credential", e.Name))
					break
				}
			}
		}
		for i := range cr.c.EnvFrom {
			out = append(out, at(s.depU, fmt.Sprintf("%s.envFrom[%d]", cr.path, i), "no envFrom (it can import credentials the audit cannot see)", "envFrom"))
		}
	}
	for i, r := range p.ImagePullSecrets {
		out = append(out, at(s.depU, fmt.Sprintf("%s.imagePullSecrets[%d]", podPath, i), "no registry credential on the pod", quote(r.Name)))
	}
	return out
}

// tokenDir is where the kubelet mounts a ServiceAccount token.
const tokenDir = "/var/run/secrets/kubernetes.io"

func checkToken(s *subject) []Finding {
	var out []Finding
	for _, o := range s.byKind["/Secret"] {
		if t, _, _ := unstructured.NestedString(o.Object, "type"); t == string(corev1.SecretTypeServiceAccountToken) {
			out = append(out, at(o, "type", "no ServiceAccount token Secret", t))
		}
	}
	p := s.pod()
	if p == nil {
		return out
	}
	for i, v := range p.Volumes {
		if v.Projected == nil {
			continue
		}
		for j, src := range v.Projected.Sources {
			if src.ServiceAccountToken != nil {
				out = append(out, at(s.depU, fmt.Sprintf("%s.volumes[%d].projected.sources[%d].serviceAccountToken", podPath, i, j), "no projected ServiceAccount token", "serviceAccountToken"))
			}
		}
	}
	for _, cr := range s.containers() {
		for i, m := range cr.c.VolumeMounts {
			if within(m.MountPath, tokenDir) || within(tokenDir, m.MountPath) && m.MountPath != "/" {
				out = append(out, at(s.depU, fmt.Sprintf("%s.volumeMounts[%d].mountPath", cr.path, i), "no mount at the ServiceAccount token path "+tokenDir, m.MountPath))
			}
		}
	}
	return out
}

// imageRef is a container image of the render and where it is.
type imageRef struct {
	u     *unstructured.Unstructured
	path  string
	image string
}

// images are the container images of every workload of the render.
func (s *subject) images() []imageRef {
	var out []imageRef
	for _, o := range slices.Concat(s.deployments, s.workloads) {
		base := []string{"spec", "template", "spec"}
		switch o.GetKind() {
		case "Pod":
			base = []string{"spec"}
		case "CronJob":
			base = []string{"spec", "jobTemplate", "spec", "template", "spec"}
		}
		for _, field := range []string{"initContainers", "containers", "ephemeralContainers"} {
			list, _, _ := unstructured.NestedSlice(o.Object, append(slices.Clone(base), field)...)
			for i, c := range list {
				m, _ := c.(map[string]any)
				img, _ := m["image"].(string)
				out = append(out, imageRef{o, fmt.Sprintf("%s.%s[%d].image", strings.Join(base, "."), field, i), img})
			}
		}
	}
	return out
}

func checkImageDigest(s *subject) []Finding {
	var out []Finding
	for _, r := range s.images() {
		if !inventory.IsPinnedImage(r.image) {
			out = append(out, at(r.u, r.path, "name[:tag]@sha256:<64 lowercase hex>", quote(r.image)))
		}
	}
	return out
}

func isPlaceholder(image string) bool { return strings.HasSuffix(image, "@"+PlaceholderDigest) }

func checkPlaceholder(s *subject) []Finding {
	var out []Finding
	if s.mode == Deployable {
		for _, r := range s.images() {
			if isPlaceholder(r.image) {
				out = append(out, at(r.u, r.path, "a released image digest (not the all-zero placeholder)", quote(r.image)))
			}
		}
		return out
	}
	c, cp := s.container()
	if c == nil || !inventory.IsPinnedImage(c.Image) {
		return nil // image-digest reports an unpinned image
	}
	if !isPlaceholder(c.Image) {
		out = append(out, at(s.depU, cp+".image", "the admin image with the all-zero placeholder digest "+PlaceholderDigest, quote(c.Image)))
	}
	return out
}
