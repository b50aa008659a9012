package inventory

import (
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// mixFS is a release of n objects in the mix of issue #8 (70% ConfigMaps
// of about 1 KiB, 10% Services, 10% ServiceAccounts, 10% Deployments),
// with the kustomization setting the namespace, as `make bench` renders.
func mixFS(b *testing.B, n int) filesys.FileSystem {
	var cms, rest strings.Builder
	deployments := max(n/10, 4)
	services, accounts := n/10, n/10
	payload := strings.Repeat("x", 900)
	for i := range n - deployments - services - accounts {
		fmt.Fprintf(&cms, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%05d\ndata:\n  revision: \"1\"\n  payload: %s\n", i, payload)
	}
	for i := range services {
		fmt.Fprintf(&rest, "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: svc-%05d\nspec:\n  selector:\n    app: d-%05d\n  ports:\n  - port: 80\n", i, i)
	}
	for i := range accounts {
		fmt.Fprintf(&rest, "---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sa-%05d\n", i)
	}
	roles := []string{RoleControl, RoleControlAI, RoleAdmin, RoleWorker}
	for i := range deployments {
		fmt.Fprintf(&rest, `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: d-%05[1]d
  labels:
    qinglong.io/role: %[2]s
spec:
  replicas: 0
  selector:
    matchLabels:
      app: d-%05[1]d
  template:
    metadata:
      labels:
        app: d-%05[1]d
    spec:
      containers:
      - name: app
        image: registry.k8s.io/pause:3.10@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a
`, i, roles[i%len(roles)])
	}
	return memFS(b, map[string]string{
		"/rel/kustomization.yaml": "namespace: bench\nresources:\n- configmaps.yaml\n- rest.yaml\n",
		"/rel/configmaps.yaml":    cms.String(),
		"/rel/rest.yaml":          rest.String(),
	})
}

// BenchmarkRenderMix renders releases of growing size. kustomize v0.21.2
// checks every added or renamed resource against all others (upstream
// kubernetes-sigs/kustomize#5084), so its time grows with the square of the
// object count; the patched copy in third_party/kustomize-api makes it grow
// linearly (docs/performance.md, "Rendering large releases").
func BenchmarkRenderMix(b *testing.B) {
	for _, n := range []int{250, 500, 1000, 2000} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			fs := mixFS(b, n)
			for b.Loop() {
				r, err := Render(fs, "/rel", Options{})
				if err != nil {
					b.Fatal(err)
				}
				if len(r.Inventory) != n {
					b.Fatalf("%d objects, want %d", len(r.Inventory), n)
				}
			}
		})
	}
}
