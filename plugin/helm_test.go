package plugin_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// helmCopy copies the chart release testdata/helm/<fixture> into a fresh
// directory, retargets its chart to namespace ns, applies edits (file ->
// old -> new) and returns it, unlocked.
func helmCopy(t *testing.T, fixture, ns string, edits ...[3]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), fixture)
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "testdata", "helm", fixture))); err != nil {
		t.Fatal(err)
	}
	edit(t, filepath.Join(dir, "kustomization.yaml"), "namespace: helm-demo", "namespace: "+ns)
	for _, e := range edits {
		edit(t, filepath.Join(dir, filepath.FromSlash(e[0])), e[1], e[2])
	}
	return dir
}

// A vendored chart through every ceremony on the real API server: lock,
// install, an upgrade that only changes a value, a rollback, and a retire
// of the object the next chart release stops rendering; the receipts audit
// as one chain, and the API server's audit log shows every write of the
// chart's objects made by kubectl-ql3's server-side apply.
func TestCLIHelmChart(t *testing.T) {
	ctx := context.Background()
	ns := controlNamespace(t)
	work := t.TempDir()
	rdir := filepath.Join(work, "receipts")
	v100 := helmCopy(t, "v1.0.0", ns)
	v101 := helmCopy(t, "v1.0.0", ns, [3]string{"values/prod.yaml", "hello from prod", "hello from prod, once more"})
	v110 := helmCopy(t, "v1.1.0", ns)
	for dir, version := range map[string]string{v100: "1.0.0", v101: "1.0.1", v110: "1.1.0"} {
		mustRun(t, nil, "lock", dir, "--version", version)
		mustRun(t, nil, "lock", "verify", dir)
	}
	step := func(name, dir, kind string) string {
		pf := filepath.Join(work, name+".json")
		mustRun(t, nil, "preflight", dir, "--transition", kind, "--expected-head", headToken(t, nil, ns), "--out", pf)
		return mustRun(t, nil, "apply", "--preflight", pf, "--receipts-dir", rdir)
	}
	cms := cp.Clientset().CoreV1().ConfigMaps(ns)
	message := func() string {
		cm, err := cms.Get(ctx, "web-web-config", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm.Data["message"]
	}
	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	gizmos := dyn.Resource(schema.GroupVersionResource{Group: "helm.demo.qinglong.io", Version: "v1", Resource: "gizmos"}).Namespace(ns)

	step("install", v100, "install")
	if m := message(); m != "hello from prod" {
		t.Fatalf("installed message %q", m)
	}
	if _, err := gizmos.Get(ctx, "web-web", metav1.GetOptions{}); err != nil {
		t.Fatalf("the chart's Gizmo (its CRD from crds/) was not applied: %v", err)
	}
	step("upgrade", v101, "upgrade")
	if m := message(); m != "hello from prod, once more" {
		t.Fatalf("upgraded message %q", m)
	}
	out, stderr, code := run(t, nil, "rollback", v100, "--expected-head", headToken(t, nil, ns), "--out", filepath.Join(work, "rollback.json"), "--receipts-dir", rdir)
	if code != 0 || !strings.Contains(out, "committed: generation 3, rollback 1.0.0") {
		t.Fatalf("rollback: exit %d\n%s\n%s", code, out, stderr)
	}
	if m := message(); m != "hello from prod" {
		t.Fatalf("rolled back message %q", m)
	}

	// 1.1.0's chart no longer renders the Gizmo: an upgrade is refused
	// (nothing prunes), a retire deletes it.
	if _, stderr, code := run(t, nil, "preflight", v110, "--transition", "upgrade", "--expected-head", headToken(t, nil, ns), "--out", filepath.Join(work, "refused.json")); code != 2 || !strings.Contains(stderr, "Gizmo") {
		t.Fatalf("upgrade that drops the Gizmo: exit %d: %s", code, stderr)
	}
	out = step("retire", v110, "retire")
	if !strings.Contains(out, "retired helm.demo.qinglong.io/v1/Gizmo/"+ns+"/web-web: deleted") {
		t.Fatalf("retire output:\n%s", out)
	}
	if _, err := gizmos.Get(ctx, "web-web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the retired Gizmo: %v", err)
	}
	cache, err := cms.Get(ctx, "web-cache", metav1.GetOptions{})
	if err != nil || cache.Data["size"] != "128" {
		t.Fatalf("subchart ConfigMap after 1.1.0: %v %v", cache.Data, err)
	}

	audit := mustRun(t, nil, "receipt", "audit", rdir, "--release", v110, "-o", "json")
	var rep receipts.Report
	if err := json.Unmarshal([]byte(audit), &rep); err != nil || !rep.OK() {
		t.Fatalf("audit: %v\n%s", err, audit)
	}
	writes, err := cp.Writes(func(e testcluster.AuditEvent) bool {
		return e.ObjectRef.Namespace == ns && e.ObjectRef.Resource == "configmaps" && e.ObjectRef.Name == "web-web-config"
	})
	if err != nil || len(writes) == 0 {
		t.Fatalf("audit log writes of the chart's ConfigMap: %d %v", len(writes), err)
	}
	for _, e := range writes {
		if e.Verb != "patch" || !strings.Contains(e.RequestURI, "fieldManager=kubectl-ql3") {
			t.Errorf("a write of the chart's ConfigMap not by kubectl-ql3's server-side apply: %s %s", e.Verb, e.RequestURI)
		}
	}
}

// At the command line: a chart fetched from a repository is refused by
// lock (exit 2, naming the file and the helm pull that vendors it) and no
// lock is written; a values change after locking makes lock verify exit 5
// naming the chart.
func TestCLIHelmLockRefusals(t *testing.T) {
	dir := helmCopy(t, "v1.0.0", "helm-demo", [3]string{"kustomization.yaml", "  version: 1.2.0\n", "  version: 1.2.0\n  repo: https://charts.example.com\n"})
	_, stderr, code := run(t, nil, "lock", dir, "--version", "1.0.0", "--cluster-identity", fixedIdentity)
	if code != 2 || !strings.Contains(stderr, `kustomization "kustomization.yaml": helmCharts[0]: chart "web" is fetched from a repository`) ||
		!strings.Contains(stderr, "helm pull web --repo https://charts.example.com --version 1.2.0 --untar --untardir charts") {
		t.Fatalf("lock of a repository chart: exit %d: %s", code, stderr)
	}
	noLockWritten(t, dir)

	dir = helmCopy(t, "v1.0.0", "helm-demo")
	mustRun(t, nil, "lock", dir, "--version", "1.0.0", "--cluster-identity", fixedIdentity)
	l, err := inventory.ParseLock([]byte(read(t, filepath.Join(dir, inventory.LockFile))))
	if err != nil {
		t.Fatal(err)
	}
	if got := mustRun(t, nil, "render", dir, "--inventory", "-o", "jsonpath={.helm.charts[0].digest}"); got != l.Helm.Charts[0].Digest {
		t.Errorf("render --inventory chart digest %q, lock %q", got, l.Helm.Charts[0].Digest)
	}
	edit(t, filepath.Join(dir, "values", "prod.yaml"), "hello from prod", "hello, edited")
	_, stderr, code = run(t, nil, "lock", "verify", dir)
	if code != 5 || !strings.Contains(stderr, `helm.charts["charts/web (release web)"].values: changed`) {
		t.Fatalf("lock verify after a values change: exit %d: %s", code, stderr)
	}
}
