// Package nodetest proves the Head ceremony on running pods (#25 §2c): on
// the test cluster's node, apply returns only once the release's
// Deployment is Available with real pods, and an upgrade to another
// locally built image returns only once the new image's pods are Ready, and
// a rollback only once the previous image runs again.
package nodetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/internal/testcluster/nodeimage"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
	"github.com/qinglong/kubectl-ql3/inventory"
)

var cp *testcluster.ControlPlane

func TestMain(m *testing.M) { testcluster.Main(m, testcluster.Options{Node: true}, &cp) }

const toolVersion = "v0.1.0-test"

// web is a release whose Deployment web runs 2 replicas of image behind a
// Service, in namespace ns, locked for the test cluster as version.
func web(t *testing.T, ns, version, image string) string {
	t.Helper()
	return webWithDeadline(t, ns, version, image, 0)
}

// webWithDeadline is web with the Deployment web's
// progressDeadlineSeconds set to deadline (0: the default, 600).
func webWithDeadline(t *testing.T, ns, version, image string, deadline int) string {
	t.Helper()
	webDeployment := deployment("web", "control", 2, image)
	if deadline > 0 {
		webDeployment = strings.Replace(webDeployment, "spec:\n  replicas:", fmt.Sprintf("spec:\n  progressDeadlineSeconds: %d\n  replicas:", deadline), 1)
	}
	dir := filepath.Join(t.TempDir(), "web-"+version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"kustomization.yaml": fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: %s
labels:
- pairs:
    app.kubernetes.io/part-of: web
    app.kubernetes.io/version: %s
  includeSelectors: false
resources:
- web.yaml
`, ns, version),
		"web.yaml": webDeployment + `---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app.kubernetes.io/name: web}
  ports: [{name: http, port: 80, targetPort: http}]
---
` + deployment("admin", "admin", 0, image) + "---\n" + deployment("control-ai", "control-ai", 0, image) +
			"---\n" + deployment("worker", "worker", 0, image),
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lockDir(t, dir, version)
	return dir
}

// lockDir writes the lock of the release in dir for the test cluster, as
// version.
func lockDir(t *testing.T, dir, version string) {
	t.Helper()
	rel, err := inventory.Render(filesys.MakeFsOnDisk(), dir, inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id, err := deploy.ReadClusterIdentity(context.Background(), deploy.NewIdentityReader(cp.Clientset()))
	if err != nil {
		t.Fatal(err)
	}
	lock, err := inventory.NewLock(rel, version, id, toolVersion)
	if err != nil {
		t.Fatal(err)
	}
	data, err := lock.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, inventory.LockFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// deployment is a Deployment of replicas pods of image labelled with role
// (a lock binds every production role to a workload; only web runs pods).
var deployment = testkit.WorkloadDeployment

// nodeOptions are the ceremony's options on the test cluster, as its
// administrator, with a 2 minute --timeout and the progress in the log.
func nodeOptions(t *testing.T) (deploy.Cluster, deploy.Options) {
	t.Helper()
	cl, err := deploy.NewKubeCluster(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return cl, deploy.Options{Cluster: cl, FS: filesys.MakeFsOnDisk(), ToolVersion: toolVersion,
		Timeout: 2 * time.Minute, ReceiptsDir: t.TempDir(), Progress: logWriter{t}}
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// deployRelease runs preflight then apply of dir and says how long apply
// took.
func deployRelease(t *testing.T, o deploy.Options, dir, kind string, exp deploy.ExpectedHead) time.Duration {
	t.Helper()
	ctx := context.Background()
	pf, err := deploy.RunPreflight(ctx, o, deploy.PreflightRequest{Dir: dir, Transition: kind, Expected: exp,
		Out: filepath.Join(t.TempDir(), "preflight.json")})
	if err != nil {
		t.Fatalf("preflight %s: %v", kind, err)
	}
	start := time.Now()
	res, err := deploy.RunApply(ctx, o, deploy.ApplyRequest{Preflight: pf.Record})
	if err != nil {
		t.Fatalf("apply %s: %v", kind, err)
	}
	if res.Outcome != "committed" {
		t.Fatalf("apply %s: outcome %q", kind, res.Outcome)
	}
	return time.Since(start)
}

// readyPods is how many of ns's web pods, not being deleted, run image and
// are Ready, and how many run another image.
func readyPods(t *testing.T, ns, image string) (ready, other int) {
	t.Helper()
	pods, err := cp.Clientset().CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		if p.Spec.Containers[0].Image != image {
			other++
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.Status.Phase == corev1.PodRunning {
				ready++
			}
		}
	}
	return ready, other
}

// apply returns only when the release runs: after install, 2 pods of the
// first image are Ready; after the upgrade, 2 of the second and none of the
// first is left running; after the rollback, 2 of the first again — each
// read once, right after apply returned.
func TestApplyWaitsForRunningPods(t *testing.T) {
	ns := cp.Namespace(t)
	cl, o := nodeOptions(t)

	v1 := web(t, ns, "1.0.0", cp.Image(nodeimage.Workload))
	took := deployRelease(t, o, v1, deploy.TransitionInstall, deploy.ExpectedHead{})
	if ready, other := readyPods(t, ns, cp.Image(nodeimage.Workload)); ready != 2 || other != 0 {
		t.Fatalf("install returned with %d Ready pods of %s and %d of another image, want 2 and 0", ready, nodeimage.Workload, other)
	}
	t.Logf("install: apply returned with 2/2 pods Ready after %s", took)

	h, err := deploy.ReadHead(context.Background(), cl, ns)
	if err != nil {
		t.Fatal(err)
	}
	took = deployRelease(t, o, web(t, ns, "1.1.0", cp.Image(nodeimage.Workload2)), deploy.TransitionUpgrade, h.Expected())
	if ready, other := readyPods(t, ns, cp.Image(nodeimage.Workload2)); ready != 2 || other != 0 {
		t.Fatalf("upgrade returned with %d Ready pods of %s and %d of the old image, want 2 and 0", ready, nodeimage.Workload2, other)
	}
	t.Logf("upgrade: apply returned with 2/2 pods of the new image Ready after %s", took)

	if h, err = deploy.ReadHead(context.Background(), cl, ns); err != nil {
		t.Fatal(err)
	}
	took = deployRelease(t, o, v1, deploy.TransitionRollback, h.Expected())
	if ready, other := readyPods(t, ns, cp.Image(nodeimage.Workload)); ready != 2 || other != 0 {
		t.Fatalf("rollback returned with %d Ready pods of %s and %d of the rolled-back image, want 2 and 0", ready, nodeimage.Workload, other)
	}
	t.Logf("rollback: apply returned with 2/2 pods of the previous image Ready after %s", took)
}
