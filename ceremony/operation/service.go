package operation

// The HTTPS endpoint: the Service and the probes on port 8443 (the
// NetworkPolicies are in network.go).

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/qinglong/kubectl-ql3/internal/manifestaudit"
)

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
		return append(out, manifestaudit.At(s.depU, "spec.template.metadata.labels", "a ClusterIP Service selecting the pod on port 8443", "none"))
	}
	for _, d := range svcs {
		sp := d.obj.Spec
		if sp.Type != "" && sp.Type != corev1.ServiceTypeClusterIP {
			out = append(out, manifestaudit.At(d.u, "spec.type", "ClusterIP", string(sp.Type)))
		}
		if sp.ClusterIP == corev1.ClusterIPNone {
			out = append(out, manifestaudit.At(d.u, "spec.clusterIP", "a cluster IP (not headless)", sp.ClusterIP))
		}
		if len(sp.Ports) != 1 {
			out = append(out, manifestaudit.At(d.u, "spec.ports", "one port, 8443", fmt.Sprintf("%d ports", len(sp.Ports))))
			continue
		}
		p := sp.Ports[0]
		if p.Port != Port || (p.Protocol != "" && p.Protocol != corev1.ProtocolTCP) {
			out = append(out, manifestaudit.At(d.u, "spec.ports[0].port", "8443/TCP", fmt.Sprintf("%d/%s", p.Port, p.Protocol)))
		}
		target := p.TargetPort
		if target.Type == intstr.Int && target.IntVal == 0 {
			target = intstr.FromInt32(p.Port) // unset: same as port
		}
		if got := s.containerPort(target); got != Port {
			out = append(out, manifestaudit.At(d.u, "spec.ports[0].targetPort", "container port 8443", fmt.Sprintf("%s (container port %d)", target.String(), got)))
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
			out = append(out, manifestaudit.At(s.depU, where, want, "<unset>"))
			continue
		case p.probe.HTTPGet == nil:
			out = append(out, manifestaudit.At(s.depU, where, want, "not an httpGet probe"))
			continue
		}
		g := p.probe.HTTPGet
		if g.Scheme != corev1.URISchemeHTTPS {
			out = append(out, manifestaudit.At(s.depU, where+".httpGet.scheme", "HTTPS", manifestaudit.Quote(string(g.Scheme))))
		}
		if g.Path != p.path {
			out = append(out, manifestaudit.At(s.depU, where+".httpGet.path", p.path, manifestaudit.Quote(g.Path)))
		}
		if got := s.containerPort(g.Port); got != Port {
			out = append(out, manifestaudit.At(s.depU, where+".httpGet.port", "container port 8443", fmt.Sprintf("%s (container port %d)", g.Port.String(), got)))
		}
	}
	return out
}
