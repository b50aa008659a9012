package views

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/inventory"
)

func TestValues(t *testing.T) {
	// The dry-run's answer: the release as the API server would set it
	// (defaults added, the protocol of a port, a false bool omitted).
	const after = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: w, namespace: ns, uid: u, resourceVersion: "7", labels: {a: "1", b: "2"}}
spec:
  replicas: 0
  template:
    spec:
      containers:
      - name: app
        image: x
        args: [--a, --b]
        ports: [{containerPort: 8080, name: http, protocol: TCP}]
        envFrom: [{configMapRef: {name: c}}]
      - name: side
        image: y
status: {replicas: 0}
`
	// The deployer's managed fields (containers keyed by name, ports by
	// containerPort and protocol; args atomic).
	const owned = `{"f:metadata":{"f:labels":{"f:a":{},"f:b":{}}},"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{
"k:{\"name\":\"app\"}":{".":{},"f:name":{},"f:image":{},"f:args":{},"f:envFrom":{},"f:ports":{"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:name":{}}}},
"k:{\"name\":\"side\"}":{".":{},"f:name":{},"f:image":{}}}}}}}`
	// Someone else's, on the live object only: a container of their own.
	const extra = `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"extra\"}":{".":{},"f:name":{},"f:image":{}}}}}}}`
	id := inventory.Identity{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "w"}
	tests := []struct {
		name             string
		edit             func(m map[string]any)
		removed, changed []string
	}{
		{"the same (status, uid, resourceVersion aside)", func(m map[string]any) {
			dig(m, "metadata")["resourceVersion"] = "9"
			m["status"] = map[string]any{"replicas": int64(1)}
		}, nil, nil},
		{"label removed", func(m map[string]any) { delete(dig(m, "metadata", "labels"), "b") }, []string{".metadata.labels.b"}, nil},
		{"label added", func(m map[string]any) { dig(m, "metadata", "labels")["c"] = "3" }, nil, []string{".metadata.labels.c"}},
		{"container field removed", func(m map[string]any) { delete(container(m, 0), "envFrom") }, []string{".spec.template.spec.containers[name=app].envFrom"}, nil},
		{"container removed", func(m map[string]any) {
			spec := dig(m, "spec", "template", "spec")
			spec["containers"] = spec["containers"].([]any)[:1]
		}, []string{".spec.template.spec.containers[name=side]"}, nil},
		{"container added", func(m map[string]any) {
			spec := dig(m, "spec", "template", "spec")
			spec["containers"] = append(spec["containers"].([]any), map[string]any{"name": "extra", "image": "z"})
		}, nil, []string{".spec.template.spec.containers[name=extra]"}},
		{"port removed", func(m map[string]any) { container(m, 0)["ports"] = []any{} }, []string{".spec.template.spec.containers[name=app].ports[containerPort=8080,protocol=TCP]"}, nil},
		{"atomic list changed", func(m map[string]any) { container(m, 0)["args"] = []any{"--a"} }, nil, []string{".spec.template.spec.containers[name=app].args"}},
		{"value changed, containers in another order", func(m map[string]any) {
			container(m, 1)["image"] = "z"
			spec := dig(m, "spec", "template", "spec")
			c := spec["containers"].([]any)
			spec["containers"] = []any{c[1], c[0]}
		}, nil, []string{".spec.template.spec.containers[name=side].image"}},
		{"a number as another decoder reads it", func(m map[string]any) { dig(m, "spec")["replicas"] = float64(0) }, nil, nil},
		{"a map replaced by a scalar", func(m map[string]any) { dig(m, "spec", "template")["spec"] = "x" }, nil, []string{".spec.template.spec"}},
	}
	mfs := []metav1.ManagedFieldsEntry{
		{Manager: "kubectl-ql3", Operation: metav1.ManagedFieldsOperationApply, FieldsV1: &metav1.FieldsV1{Raw: []byte(owned)}},
		{Manager: "kubectl-ql3", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: &metav1.FieldsV1{Raw: []byte(extra)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, l := &unstructured.Unstructured{Object: fromYAML(t, after)}, &unstructured.Unstructured{Object: fromYAML(t, after)}
			a.SetManagedFields(mfs[:1])
			tt.edit(l.Object)
			l.SetManagedFields(mfs)
			removed, changed, err := Values(id, a, l)
			if err != nil || !slices.Equal(removed, tt.removed) || !slices.Equal(changed, tt.changed) {
				t.Fatalf("Values = removed %v, changed %v, %v; want %v, %v", removed, changed, err, tt.removed, tt.changed)
			}
		})
	}
}

// A Secret's values are compared masked: a changed one is named by its
// key, never shown. Malformed managedFields are invalid input.
func TestValuesSecretAndMalformed(t *testing.T) {
	sec := inventory.Identity{APIVersion: "v1", Kind: "Secret", Namespace: "ns", Name: "s"}
	a := &unstructured.Unstructured{Object: fromYAML(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {k: dg==, same: eA==}\n")}
	l := &unstructured.Unstructured{Object: fromYAML(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {k: dw==, same: eA==}\n")}
	if removed, changed, err := Values(sec, a, l); err != nil || len(removed) != 0 || !slices.Equal(changed, []string{".data.k"}) {
		t.Fatalf("Secret: removed %v changed %v %v", removed, changed, err)
	}
	id := inventory.Identity{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "w"}
	bad := &unstructured.Unstructured{Object: fromYAML(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: w, namespace: ns}\n")}
	bad.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "x", FieldsV1: &metav1.FieldsV1{Raw: []byte("[]")}}})
	if _, _, err := Values(id, bad, bad); err == nil {
		t.Fatalf("malformed managedFields accepted")
	}
}

func fromYAML(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func dig(m map[string]any, path ...string) map[string]any {
	for _, p := range path {
		m = m[p].(map[string]any)
	}
	return m
}

func container(m map[string]any, i int) map[string]any {
	return dig(m, "spec", "template", "spec")["containers"].([]any)[i].(map[string]any)
}
