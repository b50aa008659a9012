package views

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/qinglong/kubectl-ql3/inventory"
)

func secretID() inventory.Identity {
	return inventory.Identity{APIVersion: "v1", Kind: "Secret", Namespace: "ns", Name: "s"}
}

func TestNormalize(t *testing.T) {
	tests := []struct {
		name string
		in   map[string]any
		want map[string]any
	}{
		{"nil stays nil", nil, nil},
		{"server noise removed", map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "status": map[string]any{"x": "y"},
			"metadata": map[string]any{
				"name": "c", "uid": "u", "resourceVersion": "7", "generation": int64(2), "creationTimestamp": "t",
				"selfLink": "/x", "managedFields": []any{map[string]any{"manager": "m"}},
				"annotations": map[string]any{LastApplied: "{}", "keep": "me"},
				"labels":      map[string]any{"a": "b"},
			},
			"data": map[string]any{"k": "v"},
		}, map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "c", "annotations": map[string]any{"keep": "me"}, "labels": map[string]any{"a": "b"}},
			"data":     map[string]any{"k": "v"},
		}},
		{"annotations emptied by the last-applied removal are dropped", map[string]any{
			"metadata": map[string]any{"name": "c", "annotations": map[string]any{LastApplied: "{}"}},
		}, map[string]any{"metadata": map[string]any{"name": "c"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, Normalize(tt.in)); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

func TestNormalizeDoesNotModifyItsInput(t *testing.T) {
	in := map[string]any{"metadata": map[string]any{"uid": "u"}, "status": "s"}
	Normalize(in)
	if in["status"] != "s" || in["metadata"].(map[string]any)["uid"] != "u" {
		t.Fatalf("input modified: %v", in)
	}
}

func TestMask(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	secret := func(data map[string]any) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Secret", "data": data}
	}
	tests := []struct {
		name                  string
		id                    inventory.Identity
		before, after         map[string]any
		wantBefore, wantAfter map[string]any
	}{
		{"changed, unchanged, added and removed keys", secretID(),
			secret(map[string]any{"same": b64("canary-1"), "changed": b64("canary-2"), "gone": b64("canary-3")}),
			secret(map[string]any{"same": b64("canary-1"), "changed": b64("canary-4"), "new": b64("canary-5")}),
			secret(map[string]any{"same": ValueMasked, "changed": ValueMasked, "gone": ValueMasked}),
			secret(map[string]any{"same": ValueMasked, "changed": ValueChanged, "new": ValueMasked})},
		{"created Secret: no before side", secretID(), nil,
			map[string]any{"stringData": map[string]any{"k": "canary-6"}},
			nil, map[string]any{"stringData": map[string]any{"k": ValueMasked}}},
		{"data that is not a map is masked whole", secretID(),
			map[string]any{"data": "canary-7"}, map[string]any{"data": "canary-7"},
			map[string]any{"data": ValueMasked}, map[string]any{"data": ValueMasked}},
		{"not a Secret: untouched", inventory.Identity{APIVersion: "v1", Kind: "ConfigMap", Name: "c"},
			map[string]any{"data": map[string]any{"k": "v"}}, map[string]any{"data": map[string]any{"k": "w"}},
			map[string]any{"data": map[string]any{"k": "v"}}, map[string]any{"data": map[string]any{"k": "w"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, a := Mask(tt.id, tt.before, tt.after)
			if d := cmp.Diff(tt.wantBefore, b); d != "" {
				t.Errorf("before (-want +got)\n%s", d)
			}
			if d := cmp.Diff(tt.wantAfter, a); d != "" {
				t.Errorf("after (-want +got)\n%s", d)
			}
			text, err := UnifiedDiff(tt.id, b, a)
			if err != nil {
				t.Fatal(err)
			}
			if tt.id.Kind == "Secret" && strings.Contains(text, "canary") || strings.Contains(text, b64("canary")[:8]) {
				t.Errorf("a Secret value reached the diff:\n%s", text)
			}
		})
	}
}

func TestUnifiedDiff(t *testing.T) {
	id := inventory.Identity{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "c"}
	a := map[string]any{"data": map[string]any{"level": "info"}}
	if d, err := UnifiedDiff(id, a, a); err != nil || d != "" {
		t.Fatalf("equal sides: %q %v", d, err)
	}
	d, err := UnifiedDiff(id, a, map[string]any{"data": map[string]any{"level": "debug"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--- live/v1/ConfigMap/ns/c", "+++ dry-run/v1/ConfigMap/ns/c", "-  level: info", "+  level: debug"} {
		if !strings.Contains(d, want) {
			t.Errorf("diff lacks %q:\n%s", want, d)
		}
	}
}

// The diff digest is the documented pre-image under the "diff" domain,
// and an empty list digests as [] (not null).
func TestDiffDigest(t *testing.T) {
	objs := []ObjectChange{{Object: secretID(), Change: Changed, Diff: "x"}}
	want, err := inventory.DigestOf(DomainDiff, map[string]any{"schema": DiffSchema, "objects": objs})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DiffDigest(objs); err != nil || got != want {
		t.Fatalf("DiffDigest %s, want %s (%v)", got, want, err)
	}
	empty, _ := inventory.DigestOf(DomainDiff, map[string]any{"schema": DiffSchema, "objects": []ObjectChange{}})
	if got, _ := DiffDigest(nil); got != empty {
		t.Fatalf("DiffDigest(nil) %s, want %s", got, empty)
	}
	other, _ := DiffDigest([]ObjectChange{{Object: secretID(), Change: Unchanged}})
	if other == want {
		t.Fatal("different change lists share a digest")
	}
}
