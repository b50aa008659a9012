package worker

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// keptFields is the Deployment client publish's compare-and-swap writes
// through. Reads and creates are the typed client's; an update sends
// served — the Deployment as the API server served it, read unstructured
// (servedDeployment): every field, those this build's types do not know
// included — with only its PodTemplate's annotations replaced by the
// stamped object's, under the stamped object's resourceVersion (the read
// publish judged): anything changed since, the API server answers 409, as
// it would to the typed update. A typed update sends the object as this
// build's types hold it, dropping a field a newer API server added, and
// the server would clear it.
type keptFields struct {
	cas.Client[*appsv1.Deployment]
	o      *Options
	served *unstructured.Unstructured
}

func (k keptFields) Update(ctx context.Context, dep *appsv1.Deployment, opts metav1.UpdateOptions) (*appsv1.Deployment, error) {
	u := k.served.DeepCopy()
	if err := unstructured.SetNestedStringMap(u.Object, dep.Spec.Template.Annotations, "spec", "template", "metadata", "annotations"); err != nil {
		return nil, fail.Errorf(fail.Other, "%s: spec.template.metadata: %v", k.o.deploymentWhat(dep.Name), err)
	}
	u.SetResourceVersion(dep.ResourceVersion)
	out, err := k.o.DeploymentObjects.Update(ctx, u, opts)
	if err != nil {
		return nil, err
	}
	var got appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(out.Object, &got); err != nil {
		// The write was answered: it landed. What it returned is not
		// this build's Deployment; publish reads both objects back next
		// (verify), typed, and judges them there.
		got = *dep.DeepCopy()
		got.ResourceVersion, got.Generation = out.GetResourceVersion(), out.GetGeneration()
	}
	return &got, nil
}

// servedDeployment reads Deployment name unstructured, for keptFields:
// a read error is classified as every read's (cas.Classify), absent is a
// conflict (deleted since publish read it). Publish checked that
// o.DeploymentObjects is set before any write.
func (o *Options) servedDeployment(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	u, err := o.DeploymentObjects.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, fail.Errorf(fail.Conflict, "%s was deleted while this publish wrote it: deploy the Worker again, then stage and publish", o.deploymentWhat(name))
	case err != nil:
		return nil, cas.Classify(cas.OpRead, "read "+o.deploymentWhat(name), err)
	}
	return u, nil
}
