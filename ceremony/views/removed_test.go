package views

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/inventory"
)

func TestRemoved(t *testing.T) {
	const applied = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: w, namespace: ns, labels: {a: "1", b: "2"}}
spec:
  replicas: 0
  paused: false
  template:
    spec:
      containers:
      - name: app
        image: x
        args: [--a, --b]
        ports: [{containerPort: 8080, name: http}]
        envFrom: [{configMapRef: {name: c}}]
      - name: side
        image: y
`
	// The deployer's managed fields after applying it (ports keyed by
	// containerPort and the defaulted protocol).
	const owned = `{"f:metadata":{"f:labels":{"f:a":{},"f:b":{}}},"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{
"k:{\"name\":\"app\"}":{".":{},"f:name":{},"f:image":{},"f:args":{},"f:envFrom":{},"f:ports":{"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:name":{}}}},
"k:{\"name\":\"side\"}":{".":{},"f:name":{},"f:image":{}}}}}}}`
	const live = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: w, namespace: ns, uid: u, labels: {a: "1", b: "2"}}
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
`
	id := inventory.Identity{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "w"}
	tests := []struct {
		name string
		edit func(m map[string]any)
		want []string
	}{
		{"nothing removed (defaults added, a false bool omitted)", func(map[string]any) {}, nil},
		{"label removed", func(m map[string]any) { delete(dig(m, "metadata", "labels"), "b") }, []string{".metadata.labels.b"}},
		{"container field removed", func(m map[string]any) { delete(container(m, 0), "envFrom") }, []string{".spec.template.spec.containers[name=app].envFrom"}},
		{"container removed", func(m map[string]any) {
			spec := dig(m, "spec", "template", "spec")
			spec["containers"] = spec["containers"].([]any)[:1]
		}, []string{".spec.template.spec.containers[name=side]"}},
		{"port removed", func(m map[string]any) { container(m, 0)["ports"] = []any{} }, []string{".spec.template.spec.containers[name=app].ports[containerPort=8080]"}},
		{"atomic list changed: another manager's (Drift), not removed", func(m map[string]any) { container(m, 0)["args"] = []any{"--a"} }, nil},
		{"value changed: not removed", func(m map[string]any) { container(m, 1)["image"] = "z" }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, l := fromYAML(t, applied), fromYAML(t, live)
			tt.edit(l)
			mfs := []metav1.ManagedFieldsEntry{{Manager: "ql3", Operation: metav1.ManagedFieldsOperationApply, FieldsV1: &metav1.FieldsV1{Raw: []byte(owned)}}}
			got, err := Removed(id, a, l, mfs, "ql3")
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("Removed = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	// A Secret's stringData is write-only: never live, never removed.
	sec := inventory.Identity{APIVersion: "v1", Kind: "Secret", Namespace: "ns", Name: "s"}
	got, err := Removed(sec, fromYAML(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {k: v}\n"), fromYAML(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {k: dg==}\n"), nil, "ql3")
	if err != nil || len(got) != 0 {
		t.Fatalf("Secret stringData: %v %v", got, err)
	}
	if _, err := Removed(id, fromYAML(t, applied), fromYAML(t, live), []metav1.ManagedFieldsEntry{{Manager: "ql3", FieldsV1: &metav1.FieldsV1{Raw: []byte("[")}}}, "ql3"); err == nil {
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
