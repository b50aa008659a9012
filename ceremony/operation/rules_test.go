package operation

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestWithin(t *testing.T) {
	for _, tc := range []struct {
		p, dir string
		want   bool
	}{
		{"/a/b", "/a", true},
		{"/a", "/a", true},
		{"/a/", "/a", true},
		{"/ab", "/a", false},
		{"/a", "/a/b", false},
		{"/x/../a/b", "/a", true},
		{"/anything", "/", true},
	} {
		if got := within(tc.p, tc.dir); got != tc.want {
			t.Errorf("within(%q, %q) = %t, want %t", tc.p, tc.dir, got, tc.want)
		}
	}
}

func TestIsZero(t *testing.T) {
	for _, tc := range []struct {
		v    intstr.IntOrString
		want bool
	}{
		{intstr.FromInt32(0), true},
		{intstr.FromString("0%"), true},
		{intstr.FromInt32(1), false},
		{intstr.FromString("0"), false},
		{intstr.FromString("25%"), false},
	} {
		if got := isZero(tc.v); got != tc.want {
			t.Errorf("isZero(%s) = %t, want %t", tc.v.String(), got, tc.want)
		}
	}
}

func TestIsExample(t *testing.T) {
	for name, want := range map[string]bool{
		"tls-secret.example.yaml":       true,
		"dir/identity.example.yml":      true,
		"example.yaml":                  false,
		"examples/secret.yaml":          false,
		"dir.example.d/kustomization":   false,
		"provider-secrets.example.json": true,
	} {
		if got := isExample(name); got != want {
			t.Errorf("isExample(%q) = %t, want %t", name, got, want)
		}
	}
}

// Egress rules compare by meaning, not by the order they are written in.
func TestCanonicalEgress(t *testing.T) {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	p53 := intstr.FromInt32(53)
	p5432 := intstr.FromInt32(5432)
	sel := func(k, v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
	}
	for _, tc := range []struct {
		name string
		rule networkingv1.NetworkPolicyEgressRule
		want string
	}{
		{"dns, ports reordered, TCP implied", networkingv1.NetworkPolicyEgressRule{
			To:    []networkingv1.NetworkPolicyPeer{{PodSelector: sel("k8s-app", "kube-dns"), NamespaceSelector: sel("kubernetes.io/metadata.name", "kube-system")}},
			Ports: []networkingv1.NetworkPolicyPort{{Port: &p53}, {Protocol: &udp, Port: &p53}},
		}, dnsEgress},
		{"database", networkingv1.NetworkPolicyEgressRule{
			To:    []networkingv1.NetworkPolicyPeer{{PodSelector: sel("cnpg.io/cluster", "ql3-postgres")}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p5432}},
		}, databaseEgress},
		{"database in any namespace", networkingv1.NetworkPolicyEgressRule{
			To:    []networkingv1.NetworkPolicyPeer{{PodSelector: sel("cnpg.io/cluster", "ql3-postgres"), NamespaceSelector: &metav1.LabelSelector{}}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p5432}},
		}, "to=[ns{*}/pod{cnpg.io/cluster=ql3-postgres}] ports=[TCP/5432]"},
		{"anywhere", networkingv1.NetworkPolicyEgressRule{}, "to=[] ports=[]"},
		{"cidr", networkingv1.NetworkPolicyEgressRule{
			To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.2.0.0/16", "10.1.0.0/16"}}}},
		}, "to=[ip{10.0.0.0/8 except 10.1.0.0/16,10.2.0.0/16}] ports=[]"},
	} {
		if got := canonicalEgress(tc.rule); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
