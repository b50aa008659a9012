package deploy

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"

	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// IdentityReader reads the target's cluster identity.
type IdentityReader interface {
	// KubeSystemUID is the UID of the kube-system Namespace.
	KubeSystemUID(ctx context.Context) (string, error)
}

// ReadClusterIdentity is the domain-separated digest of the kube-system
// Namespace UID (docs/digests.md).
func ReadClusterIdentity(ctx context.Context, r IdentityReader) (string, error) {
	uid, err := r.KubeSystemUID(ctx)
	if err != nil {
		return "", err
	}
	return inventory.ClusterIdentity(uid), nil
}

// kubeIdentity reads the identity through a typed client.
type kubeIdentity struct{ cs kubernetes.Interface }

// NewIdentityReader reads the cluster identity through cs.
func NewIdentityReader(cs kubernetes.Interface) IdentityReader { return kubeIdentity{cs} }

func (k kubeIdentity) KubeSystemUID(ctx context.Context) (string, error) {
	ns, err := k.cs.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return "", cas.Classify(cas.OpRead, "read cluster identity (namespace kube-system)", err)
	}
	if ns.UID == "" {
		return "", fail.Errorf(fail.Unavailable, "read cluster identity: namespace kube-system has no uid")
	}
	return string(ns.UID), nil
}

// ServerVersion asks the API server for its version.
func ServerVersion(cs kubernetes.Interface) (*version.Info, error) {
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return nil, fail.Errorf(fail.Unavailable, "server version: %w", err)
	}
	return v, nil
}
