package audit

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// FuzzCheck: the rules never panic on any decoded objects (live objects
// are not rendered by kustomize, so nothing guarantees their shape), and
// every finding names a rule of the table.
func FuzzCheck(f *testing.F) {
	for _, p := range []string{"testdata/base/worker.yaml", "testdata/base/state.yaml"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		j, err := yaml.YAMLToJSON(b)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(append(append([]byte("["), j...), ']'))
	}
	f.Add([]byte(`[{"apiVersion":"apps/v1","kind":"Deployment","spec":{"replicas":"x"}}]`))
	f.Add([]byte(`[{"apiVersion":"apps/v1","kind":"Deployment","spec":{"template":{"spec":{"volumes":[{"projected":{"sources":[{"secret":{}}]}}]}}}}]`))
	names := []string{}
	for _, r := range rules {
		names = append(names, r.Name)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var raw []map[string]any
		if json.Unmarshal(data, &raw) != nil {
			return
		}
		var objs []*unstructured.Unstructured
		for _, m := range raw {
			if m == nil {
				continue
			}
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
		for _, mode := range []Mode{Base, Deployable, Live} {
			r := Check("fuzz", objs, mode)
			for _, fd := range r.Findings {
				if !slices.Contains(names, fd.Rule) {
					t.Fatalf("finding of unknown rule %q", fd.Rule)
				}
			}
		}
	})
}
