package worker

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
)

// TestKeptFieldsKeepsWhatTheTypesDoNotKnow: the update publish sends is
// the Deployment as the API server served it, only the PodTemplate's
// annotations replaced — a field this build's types do not know (one a
// newer API server added: futureField here) is sent back, where the typed
// object (what the update sent before) has already lost it. Pure: what is
// checked is the body, not the compare-and-swap (the cluster tests).
func TestKeptFieldsKeepsWhatTheTypesDoNotKnow(t *testing.T) {
	served := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "ql3-worker", "namespace": "ns", "resourceVersion": "7"},
		"spec": map[string]any{
			"replicas": int64(1), "futureKnob": "on",
			"template": map[string]any{
				"metadata": map[string]any{"annotations": map[string]any{"team": "a"}},
				"spec":     map[string]any{"futureField": "kept", "containers": []any{map[string]any{"name": "w", "image": "w"}}},
			},
		},
	}}
	var typed appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(served.Object, &typed); err != nil {
		t.Fatal(err)
	}
	back, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&typed)
	if err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedString(back, "spec", "template", "spec", "futureField"); found {
		t.Fatal("the typed object kept futureField: the test shows nothing")
	}
	gvr := appsv1.SchemeGroupVersion.WithResource("deployments")
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "DeploymentList"}, served.DeepCopy())
	o := &Options{Namespace: "ns", DeploymentObjects: dyn.Resource(gvr).Namespace("ns")}
	objects := o.DeploymentObjects
	read, err := o.servedDeployment(context.Background(), "ql3-worker")
	if err != nil {
		t.Fatal(err)
	}
	stamped := Stamped(&typed, delivery.Stamp{delivery.AnnotationCredentialID: "cred-a"})
	if _, err := (keptFields{o: o, served: read}).Update(context.Background(), stamped, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		t.Fatal(err)
	}
	got, err := objects.Get(context.Background(), "ql3-worker", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ann, _, _ := unstructured.NestedStringMap(got.Object, "spec", "template", "metadata", "annotations")
	future, _, _ := unstructured.NestedString(got.Object, "spec", "template", "spec", "futureField")
	knob, _, _ := unstructured.NestedString(got.Object, "spec", "futureKnob")
	if future != "kept" || knob != "on" || ann["team"] != "a" || ann[delivery.AnnotationCredentialID] != "cred-a" {
		t.Fatalf("the Deployment written: futureField %q, futureKnob %q, annotations %v", future, knob, ann)
	}
}
