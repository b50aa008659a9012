package operation

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// kustomizationRefs parses any kustomization under --repo-root: it must
// never panic, and every reference it returns names a known field and
// holds a value the input spells out.
func FuzzKustomizationRefs(f *testing.F) {
	f.Add([]byte("resources:\n  - ../base\n  - a.example.yaml\ncomponents: [c]\n"))
	f.Add([]byte("patches:\n  - path: p.yaml\n  - patch: |-\n      - {op: remove, path: /x}\npatchesStrategicMerge: [s.yaml]\n"))
	f.Add([]byte("configMapGenerator:\n  - name: x\n    files: [k=f.txt]\n    envs: [e.env]\nsecretGenerator:\n  - name: y\n    env: old.env\n"))
	f.Add([]byte("resources: {not: a list}\n"))
	f.Add([]byte("replacements: [{path: r.yaml}]\npatchesJson6902: [{path: j.yaml}]\ncrds: [c.yaml]\n"))
	fields := []string{"resources[", "bases[", "components[", "crds[", "configurations[", "generators[", "transformers[", "validators[",
		"patches[", "patchesStrategicMerge[", "patchesJson6902[", "replacements[", "configMapGenerator[", "secretGenerator["}
	f.Fuzz(func(t *testing.T, data []byte) {
		refs, err := kustomizationRefs(data)
		if err != nil {
			if refs != nil {
				t.Fatalf("refs %v with error %v", refs, err)
			}
			return
		}
		for _, r := range refs {
			known := false
			for _, p := range fields {
				known = known || strings.HasPrefix(r.field, p)
			}
			if !known {
				t.Errorf("reference %+v has an unknown field", r)
			}
		}
	})
}

// The seeds above parse as intended.
func TestKustomizationRefs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []ref
	}{
		{"resources:\n  - ../base\n  - a.example.yaml\ncomponents: [c]\n", []ref{{"resources[0]", "../base"}, {"resources[1]", "a.example.yaml"}, {"components[0]", "c"}}},
		{"patches:\n  - path: p.yaml\n  - patch: x\n", []ref{{"patches[0].path", "p.yaml"}}},
		{"configMapGenerator:\n  - name: x\n    files: [k=f.txt]\n    envs: [e.env]\n", []ref{{"configMapGenerator[0].files[0]", "f.txt"}, {"configMapGenerator[0].envs[0]", "e.env"}}},
	} {
		got, err := kustomizationRefs([]byte(tc.in))
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if len(got) != len(tc.want) {
			t.Fatalf("%q: refs %+v, want %+v", tc.in, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%q: ref %d = %+v, want %+v", tc.in, i, got[i], tc.want[i])
			}
		}
	}
	if _, err := kustomizationRefs([]byte("resources: {not: a list}\n")); err == nil {
		t.Error("a map for resources parsed")
	}
}

// Audit takes whatever a kustomization renders: no manifest may make a rule
// panic, and every finding carries a rule of the table and says what was
// expected.
func FuzzAuditManifest(f *testing.F) {
	for _, name := range []string{"deployment.yaml", "network-policy.yaml", "service.yaml", "pod-disruption-budget.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", "operations", "clean", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: m}\nspec: {replicas: \"2\"}\n"))
	f.Add([]byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: m}\nspec: {template: {spec: {containers: [{name: a}, {name: b}], volumes: [{name: v, projected: {sources: [{secret: {name: ql3-postgres-ca}}]}}]}}}\n"))
	names := map[string]bool{}
	for _, r := range Rules() {
		names[r.Name] = true
	}
	f.Fuzz(func(t *testing.T, manifest []byte) {
		fsys := filesys.MakeFsInMemory()
		if err := fsys.WriteFile("/op/kustomization.yaml", []byte("namespace: ns\nresources: [m.yaml]\n")); err != nil {
			t.Fatal(err)
		}
		if err := fsys.WriteFile("/op/m.yaml", manifest); err != nil {
			t.Fatal(err)
		}
		r, err := Audit(fsys, "/op", Options{})
		if err != nil {
			return
		}
		for _, f := range r.Findings {
			if !names[f.Rule] || f.Expected == "" {
				t.Errorf("finding %+v", f)
			}
		}
	})
}
