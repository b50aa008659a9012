package deploy

import (
	"context"

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
	return cas.KubeSystemUID(ctx, k.cs.CoreV1().Namespaces())
}

// ServerVersion asks the API server for its version.
func ServerVersion(cs kubernetes.Interface) (*version.Info, error) {
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return nil, fail.Errorf(fail.Unavailable, "server version: %w", err)
	}
	return v, nil
}
