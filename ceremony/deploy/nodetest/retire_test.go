package nodetest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/testcluster/nodeimage"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// withExtra is web with one more Deployment, extra, of 2 replicas of image
// (role control, as web), locked as version.
func withExtra(t *testing.T, ns, version, image string) string {
	t.Helper()
	dir := web(t, ns, version, image)
	f, err := os.OpenFile(filepath.Join(dir, "web.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("---\n" + deployment("extra", "control", 2, image)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	lockDir(t, dir, version)
	return dir
}

// Retiring a running Deployment succeeds while its controllers keep
// updating its status (#25 §2c): after the preflight recorded extra's
// resourceVersion, one of its pods is deleted, so the ReplicaSet and
// Deployment controllers write its status again (the test waits until the
// resourceVersion moved); the retire still deletes it (a status-only
// change is not a change of the reviewed object) and commits, extra is
// gone, and web's 2 pods are still Ready.
func TestRetireRunningDeployment(t *testing.T) {
	ns := cp.Namespace(t)
	cl, o := nodeOptions(t)
	image := cp.Image(nodeimage.Workload)
	deployRelease(t, o, withExtra(t, ns, "1.0.0", image), deploy.TransitionInstall, deploy.ExpectedHead{})
	h, err := deploy.ReadHead(context.Background(), cl, ns)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pf, err := deploy.RunPreflight(ctx, o, deploy.PreflightRequest{Dir: web(t, ns, "1.1.0", image), Transition: deploy.TransitionRetire,
		Expected: h.Expected(), Out: filepath.Join(t.TempDir(), "preflight.json")})
	if err != nil {
		t.Fatalf("preflight retire: %v", err)
	}
	if len(pf.Record.Retired) != 1 || pf.Record.Retired[0].ID.Name != "extra" {
		t.Fatalf("retired: %+v, want Deployment extra", pf.Record.Retired)
	}
	reviewedRV := pf.Record.Retired[0].ResourceVersion

	deps := cp.Clientset().AppsV1().Deployments(ns)
	pods, err := cp.Clientset().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=extra"})
	if err != nil || len(pods.Items) != 2 {
		t.Fatalf("extra's pods: %v, %v; want 2", pods, err)
	}
	if err := cp.Clientset().CoreV1().Pods(ns).Delete(ctx, pods.Items[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := deps.Get(ctx, "extra", metav1.GetOptions{})
		return err == nil && d.ResourceVersion != reviewedRV, err
	}); err != nil {
		t.Fatalf("extra's status was not written again after its pod was deleted: %v", err)
	}

	start := time.Now()
	res, err := deploy.RunApply(ctx, o, deploy.ApplyRequest{Preflight: pf.Record})
	if err != nil {
		t.Fatalf("retire of a running Deployment whose status moved: %v", err)
	}
	if res.Outcome != "committed" || len(res.Retired) != 1 || res.Retired[0].Outcome != receipts.OutcomeDeleted {
		t.Fatalf("retire: outcome %q, retired %+v; want committed, extra deleted", res.Outcome, res.Retired)
	}
	if _, err := deps.Get(ctx, "extra", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("extra after the retire: %v, want NotFound", err)
	}
	if ready, other := readyPods(t, ns, image); ready != 2 || other != 0 {
		t.Fatalf("web after the retire: %d Ready pods, %d of another image; want 2 and 0", ready, other)
	}
	t.Logf("retire of the running Deployment extra committed after %s", time.Since(start))
}
