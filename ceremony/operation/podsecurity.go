package operation

// The pod security rules: non-root user and group, read-only root filesystem,
// no capabilities or privilege, RuntimeDefault seccomp.

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/qinglong/kubectl-ql3/internal/manifestaudit"
)

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
			out = append(out, manifestaudit.At(s.depU, where, "true", boolPtr(nonRoot)))
		}
		for _, f := range []struct {
			name     string
			own, pod *int64
		}{{"runAsUser", csc.RunAsUser, psc.RunAsUser}, {"runAsGroup", csc.RunAsGroup, psc.RunAsGroup}} {
			v, where := effective(f.own, f.pod, cr.path, f.name)
			if v == nil || *v != UID {
				out = append(out, manifestaudit.At(s.depU, where, fmt.Sprint(UID), intPtr(v)))
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
			out = append(out, manifestaudit.At(s.depU, cr.path+".securityContext.readOnlyRootFilesystem", "true", boolPtr(v)))
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
			out = append(out, manifestaudit.At(s.depU, w+"capabilities.drop", `["ALL"]`, fmt.Sprintf("%q", drop)))
		}
		if len(add) > 0 {
			out = append(out, manifestaudit.At(s.depU, w+"capabilities.add", "<unset>", fmt.Sprintf("%q", add)))
		}
		if sc.Privileged != nil && *sc.Privileged {
			out = append(out, manifestaudit.At(s.depU, w+"privileged", "false", "true"))
		}
		if v := sc.AllowPrivilegeEscalation; v == nil || *v {
			out = append(out, manifestaudit.At(s.depU, w+"allowPrivilegeEscalation", "false", boolPtr(v)))
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
			out = append(out, manifestaudit.At(s.depU, where+".type", "RuntimeDefault", f))
		}
	}
	return out
}
