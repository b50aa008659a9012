package cas

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// KubeSystemUID is the UID of the kube-system Namespace, read exactly
// through c: what the cluster identity digests (docs/digests.md). Every
// ceremony reads it here. A cluster with no kube-system Namespace, or one
// without a UID, has no identity: invalid, since no rerun cures it.
func KubeSystemUID(ctx context.Context, c Client[*corev1.Namespace]) (string, error) {
	ns, present, err := Read(ctx, c, metav1.NamespaceSystem, "namespace kube-system (the cluster identity)")
	if err != nil {
		return "", err
	}
	if !present || ns.UID == "" {
		return "", fail.Errorf(fail.Invalid, "the cluster has no kube-system Namespace: it has no cluster identity")
	}
	return string(ns.UID), nil
}
