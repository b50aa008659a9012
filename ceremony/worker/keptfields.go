package worker

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// keptFields is the Deployment client publish's compare-and-swap writes
// through. Reads and creates are the typed client's; an update reads the
// Deployment as the API server serves it (unstructured: every field, those
// this build's types do not know included), replaces only its PodTemplate's
// annotations with the stamped object's, and sends it back under the
// resourceVersion of the read publish judged: anything changed since then,
// the API server answers 409, as it would to the typed update. A typed
// update would send the object as this build's types hold it, dropping a
// field a newer API server added, and the server would clear it.
type keptFields struct {
	cas.Client[*appsv1.Deployment]
	objects dynamic.ResourceInterface
}

func (k keptFields) Update(ctx context.Context, dep *appsv1.Deployment, opts metav1.UpdateOptions) (*appsv1.Deployment, error) {
	if k.objects == nil {
		return nil, fail.Errorf(fail.Other, "worker publish: no unstructured Deployment client")
	}
	u, err := k.objects.Get(ctx, dep.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if err := unstructured.SetNestedStringMap(u.Object, dep.Spec.Template.Annotations, "spec", "template", "metadata", "annotations"); err != nil {
		return nil, fail.Errorf(fail.Other, "Deployment %s: spec.template.metadata: %v", dep.Name, err)
	}
	u.SetResourceVersion(dep.ResourceVersion)
	out, err := k.objects.Update(ctx, u, opts)
	if err != nil {
		return nil, err
	}
	var got appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(out.Object, &got); err != nil {
		return nil, fail.Errorf(fail.Other, "Deployment %s as updated: %v", dep.Name, err)
	}
	return &got, nil
}
