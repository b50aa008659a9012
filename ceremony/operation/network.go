package operation

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/qinglong/kubectl-ql3/internal/manifestaudit"
)

// The two egress rules the operation may have, in canonical form
// (canonicalRule): cluster DNS, and the CloudNativePG cluster ql3-postgres
// in the operation's namespace.
var (
	dnsEgress = canonicalEgress(networkingv1.NetworkPolicyEgressRule{
		To: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}},
			PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
		}},
		Ports: []networkingv1.NetworkPolicyPort{portOf(corev1.ProtocolUDP, 53), portOf(corev1.ProtocolTCP, 53)},
	})
	databaseEgress = canonicalEgress(networkingv1.NetworkPolicyEgressRule{
		To: []networkingv1.NetworkPolicyPeer{{
			PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"cnpg.io/cluster": "ql3-postgres"}},
		}},
		Ports: []networkingv1.NetworkPolicyPort{portOf(corev1.ProtocolTCP, 5432)},
	})
)

func portOf(proto corev1.Protocol, port int32) networkingv1.NetworkPolicyPort {
	p := intstr.FromInt32(port)
	return networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &p}
}

// hasType reports whether a policy governs ingress or egress, with the API
// server's default for an empty policyTypes (Ingress always, Egress when
// the policy has egress rules).
func hasType(np *networkingv1.NetworkPolicy, t networkingv1.PolicyType) bool {
	if len(np.Spec.PolicyTypes) == 0 {
		return t == networkingv1.PolicyTypeIngress || len(np.Spec.Egress) > 0
	}
	return slices.Contains(np.Spec.PolicyTypes, t)
}

func checkIngress(s *subject) []Finding {
	if s.dep == nil {
		return nil
	}
	var out []Finding
	n := 0
	for _, d := range s.policies(&out) {
		if !hasType(d.obj, networkingv1.PolicyTypeIngress) {
			continue
		}
		n++
		for i, r := range d.obj.Spec.Ingress {
			w := fmt.Sprintf("spec.ingress[%d]", i)
			if len(r.From) == 0 {
				out = append(out, manifestaudit.At(d.u, w+".from", "pods labelled "+ClientLabel+"=true in the same namespace", "<unset> (any source)"))
			}
			for j, p := range r.From {
				if !clientPeer(p) {
					out = append(out, manifestaudit.At(d.u, fmt.Sprintf("%s.from[%d]", w, j), "podSelector matchLabels "+ClientLabel+"=true, no namespaceSelector or ipBlock", canonicalPeer(p)))
				}
			}
			if len(r.Ports) == 0 {
				out = append(out, manifestaudit.At(d.u, w+".ports", "TCP 8443", "<unset> (every port)"))
			}
			for j, p := range r.Ports {
				if !s.servicePort(p) {
					out = append(out, manifestaudit.At(d.u, fmt.Sprintf("%s.ports[%d]", w, j), "TCP 8443", canonicalPort(p)))
				}
			}
		}
	}
	if n == 0 {
		out = append(out, manifestaudit.At(s.depU, "spec.template.metadata.labels", "a NetworkPolicy selecting the pod with policyType Ingress", "none (ingress is open)"))
	}
	return out
}

// clientPeer reports whether p admits only same-namespace pods labelled
// ClientLabel=true.
func clientPeer(p networkingv1.NetworkPolicyPeer) bool {
	return p.NamespaceSelector == nil && p.IPBlock == nil && p.PodSelector != nil && p.PodSelector.MatchLabels[ClientLabel] == "true"
}

// servicePort reports whether a policy port is exactly TCP 8443.
func (s *subject) servicePort(p networkingv1.NetworkPolicyPort) bool {
	if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP || p.Port == nil || p.EndPort != nil {
		return false
	}
	return s.containerPort(*p.Port) == Port
}

func checkEgress(s *subject) []Finding {
	if s.dep == nil {
		return nil
	}
	var out []Finding
	var first *decoded[networkingv1.NetworkPolicy]
	seen := map[string]bool{}
	for _, d := range s.policies(&out) {
		if !hasType(d.obj, networkingv1.PolicyTypeEgress) {
			continue
		}
		if first == nil {
			first = &d
		}
		for i, r := range d.obj.Spec.Egress {
			c := canonicalEgress(r)
			if c != dnsEgress && c != databaseEgress {
				out = append(out, manifestaudit.At(d.u, fmt.Sprintf("spec.egress[%d]", i), "the DNS rule "+dnsEgress+" or the database rule "+databaseEgress, c))
			}
			seen[c] = true
		}
	}
	if first == nil {
		return append(out, manifestaudit.At(s.depU, "spec.template.metadata.labels", "a NetworkPolicy selecting the pod with policyType Egress", "none (egress is open)"))
	}
	for _, want := range []string{dnsEgress, databaseEgress} {
		if !seen[want] {
			out = append(out, manifestaudit.At(first.u, "spec.egress", "a rule "+want, "none"))
		}
	}
	return out
}

// canonicalEgress is a rule as "to=[peers] ports=[ports]", each list sorted,
// so that equal rules compare equal whatever their order.
func canonicalEgress(r networkingv1.NetworkPolicyEgressRule) string {
	peers := make([]string, 0, len(r.To))
	for _, p := range r.To {
		peers = append(peers, canonicalPeer(p))
	}
	ports := make([]string, 0, len(r.Ports))
	for _, p := range r.Ports {
		ports = append(ports, canonicalPort(p))
	}
	slices.Sort(peers)
	slices.Sort(ports)
	return fmt.Sprintf("to=[%s] ports=[%s]", strings.Join(peers, " "), strings.Join(ports, " "))
}

// canonicalPeer writes a peer as ns{selector}/pod{selector} or ip{cidr}; an
// absent selector is omitted, an empty one is {*}.
func canonicalPeer(p networkingv1.NetworkPolicyPeer) string {
	if p.IPBlock != nil {
		ex := slices.Clone(p.IPBlock.Except)
		slices.Sort(ex)
		if len(ex) == 0 {
			return "ip{" + p.IPBlock.CIDR + "}"
		}
		return fmt.Sprintf("ip{%s except %s}", p.IPBlock.CIDR, strings.Join(ex, ","))
	}
	var parts []string
	if p.NamespaceSelector != nil {
		parts = append(parts, "ns{"+canonicalSelector(p.NamespaceSelector)+"}")
	}
	if p.PodSelector != nil {
		parts = append(parts, "pod{"+canonicalSelector(p.PodSelector)+"}")
	}
	return strings.Join(parts, "/")
}

func canonicalSelector(sel *metav1.LabelSelector) string {
	ls, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return "invalid: " + err.Error()
	}
	if ls.Empty() {
		return "*"
	}
	return ls.String()
}

func canonicalPort(p networkingv1.NetworkPolicyPort) string {
	proto := corev1.ProtocolTCP
	if p.Protocol != nil {
		proto = *p.Protocol
	}
	port := "*"
	if p.Port != nil {
		port = p.Port.String()
	}
	if p.EndPort != nil {
		port = fmt.Sprintf("%s-%d", port, *p.EndPort)
	}
	return string(proto) + "/" + port
}
