package operation

// The availability rules: one management Deployment, its replicas, anti-affinity,
// rollout and PodDisruptionBudget.

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/qinglong/kubectl-ql3/internal/manifestaudit"
)

func checkDeployment(s *subject) []Finding {
	var out []Finding
	switch n := len(s.deployments); {
	case n == 0:
		out = append(out, Finding{Expected: "one Deployment", Found: "none"})
	case n > 1:
		for _, d := range s.deployments {
			out = append(out, manifestaudit.At(d, "", "the only Deployment of the render", fmt.Sprintf("one of %d Deployments", n)))
		}
	}
	for _, w := range s.workloads {
		out = append(out, manifestaudit.At(w, "", "no workload besides the management Deployment", w.GetKind()))
	}
	if s.decodeErr != nil {
		out = append(out, manifestaudit.At(s.deployments[0], "", "a Deployment the API server accepts", s.decodeErr.Error()))
	}
	if s.dep != nil && s.mgmt < 0 {
		var names []string
		for _, c := range s.dep.Spec.Template.Spec.Containers {
			names = append(names, c.Name)
		}
		out = append(out, manifestaudit.At(s.depU, podPath+".containers", fmt.Sprintf("one container, or one named %q", ManagementContainer), fmt.Sprintf("%q", names)))
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
		return []Finding{manifestaudit.At(s.depU, "spec.replicas", "2", "<unset> (1)"+dev)}
	case *r == 1:
		return []Finding{manifestaudit.At(s.depU, "spec.replicas", "2", "1"+dev)}
	case *r != 2:
		return []Finding{manifestaudit.At(s.depU, "spec.replicas", "2", fmt.Sprint(*r))}
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
	return []Finding{manifestaudit.At(s.depU, where, "a term with topologyKey kubernetes.io/hostname whose labelSelector selects the pod's own labels", f)}
}

func checkMaxUnavailable(s *subject) []Finding {
	if s.dep == nil {
		return nil
	}
	st := s.dep.Spec.Strategy
	if st.Type != "" && st.Type != "RollingUpdate" {
		return []Finding{manifestaudit.At(s.depU, "spec.strategy.type", "RollingUpdate with maxUnavailable 0", string(st.Type))}
	}
	if st.RollingUpdate == nil || st.RollingUpdate.MaxUnavailable == nil {
		return []Finding{manifestaudit.At(s.depU, "spec.strategy.rollingUpdate.maxUnavailable", "0", "<unset> (25%)")}
	}
	if v := *st.RollingUpdate.MaxUnavailable; !isZero(v) {
		return []Finding{manifestaudit.At(s.depU, "spec.strategy.rollingUpdate.maxUnavailable", "0", v.String())}
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
		return append(out, manifestaudit.At(s.depU, "spec.template.metadata.labels", "a PodDisruptionBudget selecting the pod with minAvailable 1", "none"))
	}
	for i, d := range pdbs {
		if i > 0 {
			out = append(out, manifestaudit.At(d.u, "spec.selector", "the only PodDisruptionBudget selecting the pod", fmt.Sprintf("one of %d", len(pdbs))))
			continue
		}
		if d.obj.Spec.MaxUnavailable != nil {
			out = append(out, manifestaudit.At(d.u, "spec.maxUnavailable", "<unset> (minAvailable 1 instead)", d.obj.Spec.MaxUnavailable.String()))
		}
		switch m := d.obj.Spec.MinAvailable; {
		case m == nil:
			out = append(out, manifestaudit.At(d.u, "spec.minAvailable", "1", "<unset>"))
		case m.Type != intstr.Int || m.IntVal != 1:
			out = append(out, manifestaudit.At(d.u, "spec.minAvailable", "1", m.String()))
		}
	}
	return out
}
