package helmchart

import (
	"path/filepath"
	"strings"
	"testing"
)

// A component declaring a chart, included by two overlays with their own
// name prefixes: kustomize reads its kustomization twice, the chart is
// rendered into both, and bound once.
func TestChartInComponentUsedTwice(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rel")
	for p, data := range map[string]string{
		"kustomization.yaml":   "resources: [a, b]\n",
		"a/kustomization.yaml": "namePrefix: a-\ncomponents: [../comp]\n",
		"b/kustomization.yaml": "namePrefix: b-\ncomponents: [../comp]\n",
		"comp/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n" +
			"helmCharts:\n- name: hello\n  releaseName: hi\n  namespace: demo\n",
		"comp/charts/hello/Chart.yaml":        "apiVersion: v2\nname: hello\nversion: 0.1.0\n",
		"comp/charts/hello/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-hello\n  namespace: {{ .Release.Namespace }}\n",
	} {
		write(t, filepath.Join(dir, filepath.FromSlash(p)), data)
	}
	r := render(t, dir)
	var ids []string
	for _, id := range r.Inventory {
		ids = append(ids, id.String())
	}
	if got := strings.Join(ids, " "); got != "v1/ConfigMap/demo/a-hi-hello v1/ConfigMap/demo/b-hi-hello" {
		t.Errorf("inventory %s", got)
	}
	if r.Helm == nil || len(r.Helm.Charts) != 1 || r.Helm.Charts[0].Kustomization != "comp/kustomization.yaml" || r.Helm.Charts[0].Path != "comp/charts/hello" {
		t.Errorf("helm section %+v: want the component's chart once", r.Helm)
	}
}
