package inventory

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/internal/testcluster"
)

// TestKustomizePatchParity renders large releases in-process, through the
// patched kustomize API module (third_party/kustomize-api/README.md), and
// with the unpatched one inside `kubectl kustomize` of the test control
// plane, and compares the objects. The releases are the benchmark mix
// (hack/bench gen): flat with a namespace, and as two bases in two
// namespaces with their own name prefixes under an overlay's prefix, so
// that the name-reference fix-up the patch memoises rewrites every
// Deployment's ServiceAccount and ConfigMap reference, and picks each
// referral from its own namespace.
func TestKustomizePatchParity(t *testing.T) {
	binDir, err := testcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	kubectlPath := filepath.Join(binDir, "kubectl")
	const n = 2000
	t.Run(fmt.Sprintf("mix-%d", n), func(t *testing.T) {
		dir := t.TempDir()
		writeBenchMix(t, dir, "bench", "", n, true)
		compareWithKubectlKustomize(t, kubectlPath, dir)
	})
	t.Run(fmt.Sprintf("two-bases-%d", n), func(t *testing.T) {
		root := t.TempDir()
		writeBenchMix(t, filepath.Join(root, "a"), "ns-a", "a-", n/2, true)
		writeBenchMix(t, filepath.Join(root, "b"), "ns-b", "b-", n/2, false)
		writeTestFile(t, filepath.Join(root, "kustomization.yaml"), "namePrefix: p-\nresources:\n- a\n- b\n")
		compareWithKubectlKustomize(t, kubectlPath, root)
	})
}

// writeBenchMix writes a kustomization of n objects in the benchmark mix:
// 70% ConfigMaps of about 1 KiB, 10% each Services, ServiceAccounts and
// zero-replica Deployments; each Deployment runs as a ServiceAccount and
// reads a ConfigMap, by name. roles labels the Deployments with the
// production roles in turn.
func writeBenchMix(t *testing.T, dir, namespace, prefix string, n int, roles bool) {
	t.Helper()
	deployments, services, accounts := max(n/10, 4), n/10, n/10
	configMaps := n - deployments - services - accounts
	var cms, svcs, sas, deps strings.Builder
	for i := range configMaps {
		fmt.Fprintf(&cms, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%05d\ndata:\n  revision: \"1\"\n  payload: %s\n",
			i, strings.Repeat(fmt.Sprintf("cm-%05d;", i), 100))
	}
	for i := range services {
		fmt.Fprintf(&svcs, "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: svc-%05d\nspec:\n  selector:\n    app: d-%05d\n  ports:\n  - name: http\n    port: 80\n    targetPort: http\n",
			i, i%deployments)
	}
	for i := range accounts {
		fmt.Fprintf(&sas, "---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sa-%05d\n", i)
	}
	for i := range deployments {
		labels := ""
		if roles {
			labels = fmt.Sprintf("\n  labels:\n    qinglong.io/role: %s", ProductionRoles()[i%len(ProductionRoles())])
		}
		fmt.Fprintf(&deps, `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: d-%05[1]d%[2]s
spec:
  replicas: 0
  selector:
    matchLabels: {app: d-%05[1]d}
  template:
    metadata:
      labels: {app: d-%05[1]d}
    spec:
      serviceAccountName: sa-%05[3]d
      containers:
      - name: app
        image: %[4]s
        envFrom:
        - configMapRef: {name: cm-%05[5]d}
        ports:
        - {name: http, containerPort: 8080}
`, i, labels, i%max(accounts, 1), testImage, i%configMaps)
	}
	kust := "namespace: " + namespace + "\n"
	if prefix != "" {
		kust += "namePrefix: " + prefix + "\n"
	}
	kust += "resources:\n- configmaps.yaml\n- services.yaml\n- serviceaccounts.yaml\n- deployments.yaml\n"
	for name, body := range map[string]string{
		"kustomization.yaml": kust, "configmaps.yaml": cms.String(), "services.yaml": svcs.String(),
		"serviceaccounts.yaml": sas.String(), "deployments.yaml": deps.String(),
	} {
		writeTestFile(t, filepath.Join(dir, name), body)
	}
}

func writeTestFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRenderConcurrent renders one release in several goroutines at once:
// the patched kustomize keeps its caches per call, so concurrent renders
// share no state (run with -race, as make test does) and agree.
func TestRenderConcurrent(t *testing.T) {
	root := t.TempDir()
	writeBenchMix(t, filepath.Join(root, "a"), "ns-a", "a-", 200, true)
	writeBenchMix(t, filepath.Join(root, "b"), "ns-b", "b-", 200, false)
	writeTestFile(t, filepath.Join(root, "kustomization.yaml"), "namePrefix: p-\nresources:\n- a\n- b\n")
	const renders = 4
	digests := make([]string, renders)
	errs := make([]error, renders)
	var wg sync.WaitGroup
	for i := range renders {
		wg.Go(func() {
			r, err := Render(filesys.MakeFsOnDisk(), root, Options{})
			if err == nil {
				digests[i] = r.RenderDigest
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i := range renders {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if digests[i] != digests[0] {
			t.Errorf("render %d: digest %s, render 0: %s", i, digests[i], digests[0])
		}
	}
}
