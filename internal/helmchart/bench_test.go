package helmchart

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/inventory"
)

// bigChart writes a release of one chart rendering n objects in the mix
// of inventory's render benchmark (70% ConfigMaps of about 1 KiB, 10%
// Services, 10% ServiceAccounts, 10% Deployments), each from a template
// loop, and returns the release directory.
func bigChart(b *testing.B, n int) string {
	dir := filepath.Join(b.TempDir(), "rel")
	c := filepath.Join(dir, "charts", "big")
	deployments := max(n/10, 4)
	services, accounts := n/10, n/10
	cms := n - deployments - services - accounts
	write := func(p, data string) {
		if err := writeFile(p, data); err != nil {
			b.Fatal(err)
		}
	}
	write(filepath.Join(dir, "kustomization.yaml"), "helmCharts:\n- name: big\n  releaseName: big\n  namespace: bench\n")
	write(filepath.Join(c, "Chart.yaml"), "apiVersion: v2\nname: big\nversion: 1.0.0\n")
	write(filepath.Join(c, "values.yaml"), fmt.Sprintf("configMaps: %d\nservices: %d\naccounts: %d\ndeployments: %d\npayload: %s\nimage: %s\nroles: [control, control-ai, admin, worker]\n",
		cms, services, accounts, deployments, strings.Repeat("x", 900), "registry.k8s.io/pause:3.10@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a"))
	write(filepath.Join(c, "templates", "cm.yaml"), `{{- range $i := until (int .Values.configMaps) }}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm-{{ printf "%05d" $i }}
  namespace: {{ $.Release.Namespace }}
data:
  revision: "1"
  payload: {{ $.Values.payload }}
{{- end }}
`)
	write(filepath.Join(c, "templates", "svc.yaml"), `{{- range $i := until (int .Values.services) }}
---
apiVersion: v1
kind: Service
metadata:
  name: svc-{{ printf "%05d" $i }}
  namespace: {{ $.Release.Namespace }}
spec:
  selector:
    app: d-{{ printf "%05d" $i }}
  ports:
  - port: 80
{{- end }}
{{- range $i := until (int .Values.accounts) }}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: sa-{{ printf "%05d" $i }}
  namespace: {{ $.Release.Namespace }}
{{- end }}
`)
	write(filepath.Join(c, "templates", "deploy.yaml"), `{{- range $i := until (int .Values.deployments) }}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: d-{{ printf "%05d" $i }}
  namespace: {{ $.Release.Namespace }}
  labels:
    qinglong.io/role: {{ index $.Values.roles (mod $i 4) }}
spec:
  replicas: 0
  selector:
    matchLabels:
      app: d-{{ printf "%05d" $i }}
  template:
    metadata:
      labels:
        app: d-{{ printf "%05d" $i }}
    spec:
      containers:
      - name: main
        image: {{ $.Values.image }}
{{- end }}
`)
	return dir
}

// BenchmarkRenderChart is a release of one chart rendering 1,000 objects:
// the SDK render (twice, as every render of a chart is) and kustomize's
// pass over its output, with every check of a fresh render.
func BenchmarkRenderChart(b *testing.B) {
	dir := bigChart(b, 1000)
	for b.Loop() {
		r, err := inventory.Render(filesys.MakeFsOnDisk(), dir, inventory.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if len(r.Objects) != 1000 {
			b.Fatalf("%d objects", len(r.Objects))
		}
	}
}

func writeFile(p, data string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(data), 0o644)
}
