package nodetest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/views"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/testcluster/nodeimage"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// An upgrade whose image cannot run (a mistyped digest: the node has no
// such image and never pulls, ErrImageNeverPull) leaves the Head applying,
// and resume exits 4 however often it is run. preflight --supersede with
// the previous release, a rollback, is the way out (docs/ceremony.md §7.5):
// apply returns with 2/2 pods of the old image Ready, the receipts audit
// as one chain that declares the stuck generation superseded, and history
// shows it.
func TestSupersedeUpgradeThatCannotRun(t *testing.T) {
	ns := cp.Namespace(t)
	cl, err := deploy.NewKubeCluster(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	rdir := t.TempDir()
	o := deploy.Options{Cluster: cl, FS: filesys.MakeFsOnDisk(), ToolVersion: toolVersion,
		Timeout: 2 * time.Minute, ReceiptsDir: rdir, Progress: logWriter{t}}
	good := cp.Image(nodeimage.Workload)
	v1 := web(t, ns, "1.0.0", good)
	deployRelease(t, o, v1, deploy.TransitionInstall, deploy.ExpectedHead{})
	h1, err := deploy.ReadHead(context.Background(), cl, ns)
	if err != nil {
		t.Fatal(err)
	}

	// The workload's tag under a digest no image has: sha256 of this text.
	bad := fmt.Sprintf("%s@sha256:%x", nodeimage.Workload, sha256.Sum256([]byte("kubectl-ql3 nodetest: a mistyped digest")))
	stuckPF, err := deploy.RunPreflight(context.Background(), o, deploy.PreflightRequest{Dir: web(t, ns, "1.1.0", bad),
		Transition: deploy.TransitionUpgrade, Expected: h1.Expected(), Out: filepath.Join(t.TempDir(), "stuck.json")})
	if err != nil {
		t.Fatal(err)
	}
	short := o
	short.Timeout = 15 * time.Second
	_, err = deploy.RunApply(context.Background(), short, deploy.ApplyRequest{Preflight: stuckPF.Record})
	if !fail.Is(err, fail.Unavailable) {
		t.Fatalf("upgrade to an image that cannot run: %v (class %v), want unavailable (exit 4)", err, fail.ClassOf(err))
	}
	_, err = deploy.RunApply(context.Background(), short, deploy.ApplyRequest{Preflight: stuckPF.Record, Resume: true})
	if !fail.Is(err, fail.Unavailable) {
		t.Fatalf("resume: %v (class %v), want unavailable (exit 4) again", err, fail.ClassOf(err))
	}
	if reason := waitingReason(t, ns, bad); reason != "ErrImageNeverPull" {
		t.Fatalf("the new image's pod waits with %q, want ErrImageNeverPull", reason)
	}
	stuck, err := deploy.ReadHead(context.Background(), cl, ns)
	if err != nil || stuck.Phase != deploy.PhaseApplying || stuck.Generation != 2 {
		t.Fatalf("Head after resume: %+v %v, want generation 2 applying", stuck, err)
	}

	pf, err := deploy.RunPreflight(context.Background(), o, deploy.PreflightRequest{Dir: v1, Transition: deploy.TransitionRollback,
		Expected: stuck.Expected(), Supersede: 2, Out: filepath.Join(t.TempDir(), "supersede.json")})
	if err != nil {
		t.Fatalf("preflight --supersede 2: %v", err)
	}
	start := time.Now()
	res, err := deploy.RunApply(context.Background(), o, deploy.ApplyRequest{Preflight: pf.Record})
	if err != nil || res.Outcome != "committed" || res.Generation != 3 {
		t.Fatalf("apply of the superseding rollback: %+v %v", res, err)
	}
	if ready, other := readyPods(t, ns, good); ready != 2 || other != 0 {
		t.Fatalf("the superseding rollback returned with %d Ready pods of %s and %d of another image, want 2 and 0", ready, good, other)
	}
	t.Logf("supersede: apply returned with 2/2 pods of the previous image Ready after %s", time.Since(start))

	rep, err := receipts.Audit([]string{rdir}, receipts.AuditOptions{})
	if err != nil || !rep.OK() || !strings.Contains(strings.Join(rep.Chain.Notes, "\n"), "generation 2 (upgrade 1.1.0") {
		t.Fatalf("receipt audit: %v chain %+v", err, rep.Chain)
	}
	head, err := deploy.ReadHead(context.Background(), cl, ns)
	if err != nil {
		t.Fatal(err)
	}
	hist, err := views.History(rdir, head, ns)
	if err != nil || hist.Err() != nil {
		t.Fatalf("history: %v %v", err, hist.Err())
	}
	var rows []string
	for _, e := range hist.Entries {
		rows = append(rows, fmt.Sprintf("%d %s %s %s %d %v", e.Generation, e.Transition, e.Version, e.Verdict, e.SupersededBy, e.Supersedes))
	}
	want := []string{"1 install 1.0.0 ok 0 []", "2 upgrade 1.1.0 superseded 3 []", "3 rollback 1.0.0 ok 0 [2]"}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Fatalf("history rows:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
}

// waitingReason is why the first web pod of image is not running, as its
// kubelet reported it ("" when none waits).
func waitingReason(t *testing.T, ns, image string) string {
	t.Helper()
	pods, err := cp.Clientset().CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, c := range p.Status.ContainerStatuses {
			if p.Spec.Containers[0].Image == image && c.State.Waiting != nil {
				return c.State.Waiting.Reason
			}
		}
	}
	return ""
}
