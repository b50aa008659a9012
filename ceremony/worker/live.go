package worker

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/ceremony/worker/audit"
)

// Getter is the exact read of one object kind in one namespace;
// client-go's typed clients satisfy it.
type Getter[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
}

// Live are the reads `worker audit --deployment` makes, in the Worker's
// namespace.
type Live struct {
	Namespace   string
	Deployments Getter[*appsv1.Deployment]
	Claims      Getter[*corev1.PersistentVolumeClaim]
}

// AuditLive audits the live Worker Deployment name and the claims it
// names in live mode (docs/worker.md, "The audit").
func AuditLive(ctx context.Context, l Live, name string) (*audit.Report, error) {
	objs, err := l.read(ctx, name)
	if err != nil {
		return nil, err
	}
	return audit.Check("live", objs, audit.Live), nil
}

// read reads the Deployment and the claims it names (exact reads; no
// list, no Secret). An absent claim is left out: the state-pvc rule
// reports it.
func (l Live) read(ctx context.Context, name string) ([]*unstructured.Unstructured, error) {
	dep, err := l.Deployments.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, cas.Classify(cas.OpRead, "read Deployment "+l.Namespace+"/"+name, err)
	}
	dep.APIVersion, dep.Kind = "apps/v1", "Deployment"
	objs := []runtime.Object{dep}
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		pvc, err := l.Claims.Get(ctx, v.PersistentVolumeClaim.ClaimName, metav1.GetOptions{})
		if err != nil {
			if cas.Unknown(err) {
				return nil, cas.Classify(cas.OpRead, "read PersistentVolumeClaim", err)
			}
			continue // absent: the state-pvc rule reports it
		}
		pvc.APIVersion, pvc.Kind = "v1", "PersistentVolumeClaim"
		objs = append(objs, pvc)
	}
	var out []*unstructured.Unstructured
	for _, obj := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, err
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out, nil
}
