package inventory

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// flakyRenderer renders a ConfigMap whose data changes on every call: a
// template nondeterministic in a way no refused function names.
type flakyRenderer struct {
	mu sync.Mutex
	n  int
}

func (*flakyRenderer) SDKVersion() string         { return "v0.0.0-test" }
func (*flakyRenderer) DefaultKubeVersion() string { return "v1.37.0" }
func (f *flakyRenderer) RenderChart(req ChartRequest) (*ChartOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return &ChartOutput{Name: "web", Version: "1.0.0", APIVersions: []string{"v1"}, Docs: []ChartDoc{{
		Source: "web/templates/cm.yaml",
		YAML:   fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  namespace: demo\ndata:\n  n: %q\n", fmt.Sprint(f.n)),
	}}}, nil
}

// A chart whose two renders differ is refused, naming the template, even
// when no refused function is to blame: a render that is not reproducible
// must fail the lock, not pass it once.
func TestChartRenderedTwice(t *testing.T) {
	SetChartRenderer(&flakyRenderer{})
	t.Cleanup(func() { SetChartRenderer(nil) })
	files := minimalRelease()
	files["/rel/kustomization.yaml"] += "helmCharts:\n- name: web\n  releaseName: web\n"
	files["/rel/charts/web/Chart.yaml"] = "apiVersion: v2\nname: web\nversion: 1.0.0\n"
	_, err := Render(memFS(t, files), "/rel", Options{})
	if err == nil || fail.ClassOf(err) != fail.Invalid {
		t.Fatalf("render: %v, want invalid", err)
	}
	for _, w := range []string{`helmCharts[0]: chart "charts/web" does not render reproducibly`, `template "web/templates/cm.yaml"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}

// Without a chart renderer (a build that links no Helm SDK) a chart is
// refused, never skipped.
func TestChartWithoutRenderer(t *testing.T) {
	SetChartRenderer(nil)
	files := minimalRelease()
	files["/rel/kustomization.yaml"] += "helmCharts:\n- name: web\n  releaseName: web\n"
	files["/rel/charts/web/Chart.yaml"] = "apiVersion: v2\nname: web\nversion: 1.0.0\n"
	_, err := Render(memFS(t, files), "/rel", Options{})
	if err == nil || !strings.Contains(err.Error(), "this build renders no Helm charts") {
		t.Fatalf("render: %v", err)
	}
}
