package views

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ReleaseChanges compares two rendered releases offline: created,
// changed (a unified diff deployed/ -> release/), unchanged, the objects
// dropped listed for retirement, Secret values masked, and a digest that
// is DiffDigest of the list.
func TestReleaseChanges(t *testing.T) {
	cm := func(name, v string) *unstructured.Unstructured {
		return configMap("ns", name, map[string]any{"level": v})
	}
	secret := func(v string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": "tok", "namespace": "ns"}, "stringData": map[string]any{"token": v}}}
	}
	deployed := []*unstructured.Unstructured{cm("same", "info"), cm("edit", "info"), cm("gone", "info"), secret("canary-old-1f2e")}
	release := []*unstructured.Unstructured{secret("canary-new-9a8b"), cm("new", "info"), cm("edit", "debug"), cm("same", "info")}
	rep, err := ReleaseChanges(deployed, release, "ns", "2.0.0")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, o := range rep.Objects {
		got[o.Object.Name] = o.Change
		if strings.Contains(o.Diff, "canary") {
			t.Fatalf("%s: a Secret value shown:\n%s", o.Object, o.Diff)
		}
	}
	if got["same"] != Unchanged || got["edit"] != Changed || got["new"] != Created || got["tok"] != Changed || rep.Created != 1 || rep.Changed != 2 || rep.Unchanged != 1 {
		t.Fatalf("changes %v, counts %d/%d/%d", got, rep.Created, rep.Changed, rep.Unchanged)
	}
	if len(rep.Retire) != 1 || rep.Retire[0].Object.Name != "gone" || rep.Retire[0].UID != "" {
		t.Fatalf("retire %+v", rep.Retire)
	}
	for _, o := range rep.Objects {
		if o.Object.Name == "edit" && !strings.Contains(o.Diff, "--- deployed/v1/ConfigMap/ns/edit\n+++ release/v1/ConfigMap/ns/edit\n") || o.Object.Name == "edit" && !strings.Contains(o.Diff, "-  level: info\n+  level: debug\n") {
			t.Fatalf("diff of edit:\n%s", o.Diff)
		}
		if o.Object.Name == "tok" && !strings.Contains(o.Diff, "token: "+ValueChanged) {
			t.Fatalf("diff of the Secret:\n%s", o.Diff)
		}
	}
	if want, err := DiffDigest(rep.Objects); err != nil || rep.Digest != want || rep.Namespace != "ns" || rep.Version != "2.0.0" {
		t.Fatalf("digest %s, want %s (%v); %s %s", rep.Digest, want, err, rep.Namespace, rep.Version)
	}
	// Nothing deployed: every object created.
	if rep, err := ReleaseChanges(nil, release, "ns", "2.0.0"); err != nil || rep.Created != len(release) || len(rep.Retire) != 0 {
		t.Fatalf("install: %+v %v", rep, err)
	}
}
