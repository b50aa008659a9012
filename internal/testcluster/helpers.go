package testcluster

import (
	"context"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The helpers below are the ones every real-cluster test package needs:
// one user per simulated operator and the writes the API server's audit
// log saw from a user; rbac.go grants what a command prints, lessone.go
// less one verb to prove it fails closed.

// User is UserConfig for a test: a client configuration for user (with
// the given groups), failing the test when it cannot be minted.
func (cp *ControlPlane) User(t testing.TB, user string, groups ...string) *rest.Config {
	t.Helper()
	cfg, err := cp.UserConfig(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// KubeSystemUID is the UID of the kube-system Namespace, read as the
// admin: what the cluster identity is computed from
// (canon.ClusterIdentity).
func (cp *ControlPlane) KubeSystemUID(t testing.TB) string {
	t.Helper()
	ns, err := cp.Clientset().CoreV1().Namespaces().Get(context.Background(), metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(ns.UID)
}

// WritesBy is Writes for a test: the completed writes user sent in
// namespace ns (every resource), in the order the API server logged them.
func (cp *ControlPlane) WritesBy(t testing.TB, user, ns string) []AuditEvent {
	t.Helper()
	evs, err := cp.Writes(func(e AuditEvent) bool {
		return e.User.Username == user && e.ObjectRef.Namespace == ns
	})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// WriteVerbs is the verbs of the writes user sent for resource in ns.
func (cp *ControlPlane) WriteVerbs(t testing.TB, user, ns, resource string) []string {
	t.Helper()
	var out []string
	for _, e := range cp.WritesBy(t, user, ns) {
		if e.ObjectRef.Resource == resource {
			out = append(out, e.Verb)
		}
	}
	return out
}

// NoWrites fails the test when user sent any write for resource in ns: a
// refusal must come before every write.
func (cp *ControlPlane) NoWrites(t testing.TB, user, ns, resource string) {
	t.Helper()
	if vs := cp.WriteVerbs(t, user, ns, resource); len(vs) > 0 {
		t.Fatalf("%s sent %v of %s in %s: the refusal was not before every write", user, vs, resource, ns)
	}
}

// ServiceAccountKubeconfig creates the ServiceAccount name in namespace ns
// and writes a kubeconfig that authenticates as it, by a token the admin
// requested for it (TokenRequest, one hour): the API server sees
// system:serviceaccount:NS:NAME, as it sees a pod running as that
// ServiceAccount. It returns the path and that user name.
func (cp *ControlPlane) ServiceAccountKubeconfig(t testing.TB, ns, name string) (path, user string) {
	t.Helper()
	ctx, cs := context.Background(), cp.Clientset()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hour := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	user = "system:serviceaccount:" + ns + ":" + name
	path = cp.path("kubeconfigs", "sa-"+ns+"-"+name+".yaml")
	if err := cp.writeKubeconfig(path, user, &clientcmdapi.AuthInfo{Token: tr.Status.Token}); err != nil {
		t.Fatal(err)
	}
	return path, user
}
