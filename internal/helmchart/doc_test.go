package helmchart

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/internal/testkit"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// TestLockDocHelmExample renders docs/lock.md's Helm worked example from
// its files and checks every value it shows: the object, the chart tree's
// canonical JSON and digest (recomputed with crypto/sha256 and the
// documented primitive), and the helm section.
func TestLockDocHelmExample(t *testing.T) {
	ex := testkit.DocExamples(t, "lock.md", "helm-kustomization", "helm-chart-yaml", "helm-template", "helm-values",
		"helm-render", "helm-tree", "helm-chart-digest", "helm-section")
	dir := filepath.Join(t.TempDir(), "rel")
	files := map[string]string{
		"kustomization.yaml":             ex["helm-kustomization"],
		"charts/hello/Chart.yaml":        ex["helm-chart-yaml"],
		"charts/hello/templates/cm.yaml": ex["helm-template"],
		"values.yaml":                    ex["helm-values"],
	}
	for p, data := range files {
		write(t, filepath.Join(dir, filepath.FromSlash(p)), data+"\n")
	}
	r := render(t, dir)

	objs, err := json.MarshalIndent(r.Objects[0].Object, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(objs); got != ex["helm-render"] {
		t.Errorf("helm-render: doc\n%s\ngot\n%s", ex["helm-render"], got)
	}

	// The chart tree by the documented algorithm alone.
	type entry struct {
		Path   string `json:"path"`
		Digest string `json:"digest"`
	}
	var tree []entry
	for _, p := range []string{"Chart.yaml", "templates/cm.yaml"} {
		data, err := os.ReadFile(filepath.Join(dir, "charts", "hello", filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		tree = append(tree, entry{p, "sha256:" + hex.EncodeToString(sum[:])})
	}
	raw, err := json.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	canonical, err := canon.CanonicalizeJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	if string(canonical) != ex["helm-tree"] {
		t.Errorf("helm-tree: doc\n%s\ngot\n%s", ex["helm-tree"], canonical)
	}
	sum := sha256.Sum256(append([]byte("kubectl-ql3/helm-chart/v1\x00"), canonical...))
	digest := "sha256:" + hex.EncodeToString(sum[:])
	if digest != ex["helm-chart-digest"] || r.Helm.Charts[0].Digest != digest {
		t.Errorf("helm-chart-digest: doc %s, recomputed %s, render %s", ex["helm-chart-digest"], digest, r.Helm.Charts[0].Digest)
	}

	var doc struct {
		Helm inventory.LockHelm `json:"helm"`
	}
	if err := yaml.UnmarshalStrict([]byte(ex["helm-section"]), &doc); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&doc.Helm, r.Helm); diff != "" {
		got, _ := yaml.Marshal(map[string]any{"helm": r.Helm})
		t.Errorf("helm-section (-doc +render):\n%s\nrender:\n%s", diff, got)
	}
	if strings.Contains(ex["helm-section"], "TBD") {
		t.Error("the doc still has placeholders")
	}
}
