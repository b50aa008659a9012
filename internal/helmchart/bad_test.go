package helmchart

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// edit rewrites the fixture file rel (relative to the release) with f.
func edit(t *testing.T, dir, rel string, f func(string) string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(f(string(data))), 0o644); err != nil {
		t.Fatal(err)
	}
}

func replace(old, new string) func(string) string {
	return func(s string) string {
		if !strings.Contains(s, old) {
			panic("fixture lacks " + old)
		}
		return strings.Replace(s, old, new, 1)
	}
}

func write(t *testing.T, p, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Bad charts and values are invalid input (exit 2), each error naming the
// kustomization entry and the file, and saying what to do.
func TestRenderBadCharts(t *testing.T) {
	const kust = "kustomization.yaml"
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  []string
	}{
		{"repository chart", func(t *testing.T, dir string) {
			edit(t, dir, kust, replace("  version: 1.2.0\n", "  version: 1.2.0\n  repo: https://charts.example.com\n"))
		}, []string{`kustomization "kustomization.yaml": helmCharts[0]: chart "web" is fetched from a repository`,
			"helm pull web --repo https://charts.example.com --version 1.2.0 --untar --untardir charts"}},
		{"oci chart", func(t *testing.T, dir string) {
			edit(t, dir, kust, replace("- name: web\n", "- name: oci://registry.example.com/charts/web\n"))
		}, []string{`chart "oci://registry.example.com/charts/web" is fetched from a repository`, "helm pull oci://registry.example.com/charts/web --version 1.2.0 --untar"}},
		{"repository chart by name", func(t *testing.T, dir string) {
			edit(t, dir, kust, replace("- name: web\n", "- name: example/web\n"))
		}, []string{`chart "example/web" names a chart of a Helm repository`, `helm pull example/web --version 1.2.0 --untar --untardir charts, then name it "web"`}},
		{"chart not vendored", func(t *testing.T, dir string) {
			edit(t, dir, kust, replace("- name: web\n", "- name: api\n"))
		}, []string{`neither the chart directory "charts/api" nor a chart archive ["charts/api-1.2.0.tgz" "charts/api.tgz"] exists; vendor the chart with helm pull api --version 1.2.0 --untar --untardir charts`}},
		{"missing dependency", func(t *testing.T, dir string) {
			if err := os.RemoveAll(filepath.Join(dir, "charts", "web", "charts")); err != nil {
				t.Fatal(err)
			}
		}, []string{`chart "charts/web": dependencies ["cache"] are listed in charts/web/Chart.yaml but missing from charts/web/charts/; vendor them with helm dependency build charts/web`}},
		{"values file outside the release", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "..", "outside.yaml"), "message: from outside\n")
			edit(t, dir, kust, replace("valuesFile: values/prod.yaml", "valuesFile: ../outside.yaml"))
		}, []string{`helmCharts[0]: values file "../outside.yaml" is outside the kustomization's directory`}},
		{"values file linked outside the release", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "..", "outside.yaml"), "message: from outside\n")
			p := filepath.Join(dir, "values", "prod.yaml")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(dir, "..", "outside.yaml"), p); err != nil {
				t.Fatal(err)
			}
		}, []string{`values file "values/prod.yaml" leads outside the release`}},
		{"chart file linked outside the release", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "..", "outside.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: outside\n  namespace: x\n")
			if err := os.Symlink(filepath.Join(dir, "..", "outside.yaml"), filepath.Join(dir, "charts", "web", "templates", "outside.yaml")); err != nil {
				t.Fatal(err)
			}
		}, []string{`chart file "charts/web/templates/outside.yaml" is a link that leads outside the release`}},
		{"chart directory linked outside the release", func(t *testing.T, dir string) {
			outside := filepath.Join(filepath.Dir(dir), "vendor-web")
			if err := os.Rename(filepath.Join(dir, "charts", "web"), outside); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(dir, "charts", "web")); err != nil {
				t.Fatal(err)
			}
		}, []string{`chart directory "charts/web" is a link, or leads outside the release`}},
		{"non-reproducible template", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "charts", "web", "templates", "token.yaml"),
				"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: token\n  namespace: {{ .Release.Namespace }}\ndata:\n  token: {{ randAlphaNum 16 }}\n")
		}, []string{"web/templates/token.yaml", "randAlphaNum is not reproducible"}},
		{"clock in a template", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "charts", "web", "templates", "stamp.yaml"),
				"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: stamp\n  namespace: {{ .Release.Namespace }}\ndata:\n  at: {{ now | date \"2006\" | quote }}\n")
		}, []string{"web/templates/stamp.yaml", "now is not reproducible"}},
		{"schema violation", func(t *testing.T, dir string) {
			edit(t, dir, "values/prod.yaml", replace("replicas: 0", "replicas: -1"))
		}, []string{`chart "charts/web": values do not match charts/web/values.schema.json`, "replicas"}},
		{"schema type violation", func(t *testing.T, dir string) {
			edit(t, dir, "values/prod.yaml", replace("message: hello from prod", "message: [not, a, string]"))
		}, []string{"charts/web/values.schema.json", "message"}},
		{"schema reading a file outside the release", func(t *testing.T, dir string) {
			// A schema the source digest does not bind would decide what
			// values pass: refused, though this one would accept them.
			outside := filepath.Join(filepath.Dir(dir), "message.schema.json")
			write(t, outside, `{"type": "string"}`)
			edit(t, dir, "charts/web/values.schema.json", replace(`"message": {"type": "string"}`, `"message": {"$ref": "file://`+outside+`"}`))
		}, []string{`charts/web/values.schema.json: $ref "file:///`, `message.schema.json" refers to another document`}},
		{"subchart schema fetching a URL", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "charts", "web", "charts", "cache", "values.schema.json"), `{"properties": {"size": {"$ref": "https://schemas.example.com/size.json"}}}`)
		}, []string{`charts/web/charts/cache/values.schema.json: $ref "https://schemas.example.com/size.json" refers to another document`}},
		{"required value missing", func(t *testing.T, dir string) {
			edit(t, dir, "values/prod.yaml", replace("message: hello from prod", `message: ""`))
		}, []string{"web/templates/config.yaml", "message is required: set it in a values file"}},
		{"hook without skipHooks", func(t *testing.T, dir string) {
			edit(t, dir, kust, replace("  skipHooks: true\n", ""))
		}, []string{`template "web/templates/hook-migrate.yaml": Job "web-web-migrate" is a Helm hook (helm.sh/hook: pre-install,pre-upgrade)`, "skipHooks: true"}},
		{"version differs from Chart.yaml", func(t *testing.T, dir string) {
			edit(t, dir, kust, replace("version: 1.2.0", "version: 1.3.0"))
		}, []string{`version "1.3.0", but the Chart.yaml of charts/web says "1.2.0"`}},
		{"no release name", func(t *testing.T, dir string) {
			edit(t, dir, kust, replace("  releaseName: web\n", ""))
		}, []string{"helmCharts[0]: releaseName is required"}},
		{"kube version below the chart's", func(t *testing.T, dir string) {
			edit(t, dir, kust, replace("kubeVersion: v1.36.0", "kubeVersion: v1.29.0"))
		}, []string{`chart "charts/web" requires kubeVersion >=1.30.0-0, incompatible with v1.29.0`}},
		{"chart home outside", func(t *testing.T, dir string) {
			edit(t, dir, kust, func(s string) string { return "helmGlobals:\n  chartHome: ../vendor\n" + s })
		}, []string{`chartHome "../vendor" leaves the kustomization's directory`}},
		{"reserved resource name", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, inventory.ChartResource), "")
		}, []string{`the file name ".ql3-helm-charts.yaml" is reserved`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := fixture(t)
			tc.setup(t, dir)
			_, err := inventory.Render(filesys.MakeFsOnDisk(), dir, inventory.Options{})
			if err == nil {
				t.Fatal("render succeeded")
			}
			t.Logf("%v", err)
			if c := fail.ClassOf(err); c != fail.Invalid {
				t.Errorf("class %v, want invalid: %v", c, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
			var le *inventory.LockError
			if errors.As(err, &le) {
				t.Errorf("a render error is not a lock mismatch: %v", err)
			}
		})
	}
}
