package operation

// The pod's Kubernetes identity: its ServiceAccount, token automount, no RBAC,
// no Kubernetes API token.

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qinglong/kubectl-ql3/internal/manifestaudit"
)

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
		return []Finding{manifestaudit.At(s.depU, podPath+".serviceAccountName", expected, manifestaudit.Quote(name))}
	case sa == nil:
		return []Finding{manifestaudit.At(s.depU, podPath+".serviceAccountName", expected, fmt.Sprintf("%q, which the render does not hold", name))}
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
		out = append(out, manifestaudit.At(s.depU, podPath+".automountServiceAccountToken", "false", boolText(a)))
	}
	if sa, _ := s.serviceAccount(); sa != nil {
		v, found, err := unstructured.NestedFieldNoCopy(sa.Object, "automountServiceAccountToken")
		if b, ok := v.(bool); err != nil || !found || !ok || b {
			f := "<unset> (true)"
			if found {
				f = fmt.Sprint(v)
			}
			out = append(out, manifestaudit.At(sa, "automountServiceAccountToken", "false", f))
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
			out = append(out, manifestaudit.At(o, "", "no RBAC object in the operation", k))
		}
	}
	return out
}

// tokenDir is where the kubelet mounts a ServiceAccount token.
const tokenDir = "/var/run/secrets/kubernetes.io"

func checkToken(s *subject) []Finding {
	var out []Finding
	for _, o := range s.byKind["/Secret"] {
		if t, _, _ := unstructured.NestedString(o.Object, "type"); t == string(corev1.SecretTypeServiceAccountToken) {
			out = append(out, manifestaudit.At(o, "type", "no ServiceAccount token Secret", t))
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
				out = append(out, manifestaudit.At(s.depU, fmt.Sprintf("%s.volumes[%d].projected.sources[%d].serviceAccountToken", podPath, i, j), "no projected ServiceAccount token", "serviceAccountToken"))
			}
		}
	}
	for _, cr := range s.containers() {
		for i, m := range cr.c.VolumeMounts {
			if within(m.MountPath, tokenDir) || within(tokenDir, m.MountPath) && m.MountPath != "/" {
				out = append(out, manifestaudit.At(s.depU, fmt.Sprintf("%s.volumeMounts[%d].mountPath", cr.path, i), "no mount at the ServiceAccount token path "+tokenDir, m.MountPath))
			}
		}
	}
	return out
}
