package helmchart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
)

func TestMain(m *testing.M) {
	Register()
	os.Exit(m.Run())
}

// fixture is the release of testdata/helm/v1.0.0 copied into a temporary
// directory, so a test may change it.
func fixture(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "rel")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "testdata", "helm", "v1.0.0"))); err != nil {
		t.Fatal(err)
	}
	return dir
}

func render(t *testing.T, dir string) *inventory.Release {
	t.Helper()
	r, err := inventory.Render(filesys.MakeFsOnDisk(), dir, inventory.Options{})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return r
}

// The fixture chart renders in-process into the inventory: the templates
// (helpers, tpl, required, .Capabilities checks), the subchart with its
// global value, the CRD of crds/ — and neither the hook (skipHooks), the
// test hook nor NOTES.txt.
func TestRenderFixture(t *testing.T) {
	r := render(t, fixture(t))
	var got []string
	for _, id := range r.Inventory {
		got = append(got, id.String())
	}
	want := []string{
		"apiextensions.k8s.io/v1/CustomResourceDefinition/-/gizmos.helm.demo.qinglong.io",
		"apps/v1/Deployment/helm-demo/web-web-admin",
		"apps/v1/Deployment/helm-demo/web-web-control",
		"apps/v1/Deployment/helm-demo/web-web-control-ai",
		"apps/v1/Deployment/helm-demo/web-web-worker",
		"helm.demo.qinglong.io/v1/Gizmo/helm-demo/web-web",
		"v1/ConfigMap/helm-demo/web-cache",
		"v1/ConfigMap/helm-demo/web-web-config",
		"v1/Namespace/-/helm-demo",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("inventory:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	cm := r.Objects[7].Object["data"].(map[string]any)
	for k, v := range map[string]string{"message": "hello from prod", "greeting": "web in helm-demo says hello from prod",
		"kubeVersion": "v1.36.0", "workloads": "apps/v1", "modern": "true"} {
		if cm[k] != v {
			t.Errorf("config data[%s] = %v, want %q", k, cm[k], v)
		}
	}
	cache := r.Objects[6].Object["data"].(map[string]any)
	if cache["size"] != "64" || cache["team"] != "platform" {
		t.Errorf("subchart data = %v, want size 64 (the release's values) and team platform (global)", cache)
	}
	if r.Helm == nil || len(r.Helm.Charts) != 1 {
		t.Fatalf("helm section = %+v", r.Helm)
	}
	c := r.Helm.Charts[0]
	if c.Name != "web" || c.Version != "1.2.0" || c.Path != "charts/web" || c.KubeVersion != "v1.36.0" ||
		len(c.Values) != 1 || c.Values[0].Path != "values/prod.yaml" || !inventory.IsDigest(c.Digest) {
		t.Errorf("chart binding = %+v", c)
	}
	if r.Helm.SDK != SDKVersion {
		t.Errorf("sdk = %q", r.Helm.SDK)
	}
	for _, f := range r.Sources {
		if f.Path == inventory.ChartResource {
			t.Errorf("the in-memory chart resource is listed as a source file")
		}
	}
	if !hasSource(r, "charts/web/README.md") || !hasSource(r, "charts/web/charts/cache/templates/configmap.yaml") {
		t.Errorf("source files %v: want every file of the chart tree, .helmignore'd ones too", r.Sources)
	}
}

func hasSource(r *inventory.Release, p string) bool {
	for _, f := range r.Sources {
		if f.Path == p {
			return true
		}
	}
	return false
}

var _ = fail.Invalid
