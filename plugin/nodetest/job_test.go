// Package nodetest runs the ceremony from inside the test cluster (#25
// §2d): the release's own container image, built by goreleaser from
// .goreleaser.yaml and imported into the node's containerd, runs preflight
// and apply as a Kubernetes Job under a ServiceAccount bound to exactly
// what `kubectl ql3 rbac` prints, the release mounted from a ConfigMap as a
// directory (the kubelet's links, no subPath); the receipt it writes passes
// `kubectl ql3 receipt audit` offline. The Job is the one docs/guide-ci-and-jobs.md shows, read from it.
package nodetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/internal/testcluster/nodeimage"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// deployer is the Job's ServiceAccount, as docs/guide-ci-and-jobs.md names it.
const deployer = "ql3-deployer"

var cp *testcluster.ControlPlane

func TestMain(m *testing.M) {
	testcluster.Main(m, testcluster.Options{Node: true, AuditLog: true}, &cp)
}

// The Job runs preflight (an initContainer) and apply of an install as the
// ServiceAccount bound to exactly the printed RBAC; the Head is committed
// with the release, every write to the target came from the ServiceAccount,
// and the receipt passes the offline audit against the release directory.
// With one verb less than printed, the Job fails closed: exit 2 (invalid:
// an RBAC refusal), no Head, no object, no receipt.
func TestCeremonyAsJob(t *testing.T) {
	rel := buildImage(t)
	t.Run("printed RBAC committed and audited", func(t *testing.T) {
		ci, target := cp.Namespace(t), cp.Namespace(t)
		dir := releaseDir(t, rel, target)
		sa := "system:serviceaccount:" + ci + ":" + deployer
		kubectl(t, rel.ql3(t, 0, "rbac", dir, "--bind-user", sa), "apply", "-f", "-")
		receiptsDir, pod := runJob(t, rel, ci, dir)
		if pod.Status.Phase != corev1.PodSucceeded {
			t.Fatalf("the Job failed: %s", describe(t, ci, pod))
		}
		cl, err := deploy.NewKubeCluster(cp.RESTConfig())
		if err != nil {
			t.Fatal(err)
		}
		h, err := deploy.ReadHead(context.Background(), cl, target)
		if err != nil || h == nil {
			t.Fatalf("read the Head: %v (nil: %v)", err, h == nil)
		}
		if h.Phase != deploy.PhaseCommitted || h.Generation != 1 || h.Current.Version != "1.0.0" || len(h.Current.Inventory) != 4 {
			t.Fatalf("Head %s generation %d version %q with %d objects, want committed 1 1.0.0 with 4", h.Phase, h.Generation, h.Current.Version, len(h.Current.Inventory))
		}
		for _, id := range h.Current.Inventory {
			d, err := cp.Clientset().AppsV1().Deployments(target).Get(context.Background(), id.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			applied := false
			for _, m := range d.ManagedFields {
				applied = applied || m.Manager == inventory.FieldManager && m.Operation == metav1.ManagedFieldsOperationApply
			}
			if !applied {
				t.Errorf("%s is not applied by field manager %s", id, inventory.FieldManager)
			}
		}
		rel.ql3(t, 0, "receipt", "audit", receiptsDir, "--release", dir)
		checkWriters(t, sa, target)
	})

	t.Run("one verb less fails closed", func(t *testing.T) {
		ci, target := cp.Namespace(t), cp.Namespace(t)
		dir := releaseDir(t, rel, target)
		sa := "system:serviceaccount:" + ci + ":" + deployer
		kubectl(t, withoutVerb(t, rel.ql3(t, 0, "rbac", dir, "--bind-user", sa, "-o", "json"), "update"), "apply", "-f", "-")
		receiptsDir, pod := runJob(t, rel, ci, dir)
		if pod.Status.Phase != corev1.PodFailed {
			t.Fatalf("the Job did not fail: %s", describe(t, ci, pod))
		}
		// Refused by the permission review for the missing verb, not for
		// anything else that exits 2 (invalid input).
		msg := describe(t, ci, pod)
		if code := exitCode(pod); code != 2 || !strings.Contains(msg, "the caller lacks 1 permission(s) this operation needs, so nothing was written: update configmaps") {
			t.Fatalf("the ceremony exited %d, want 2, refused for the Head's update: %s", code, msg)
		}
		_, err := cp.Clientset().CoreV1().ConfigMaps(target).Get(context.Background(), deploy.HeadName, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Fatalf("Head after the refusal: %v, want not found", err)
		}
		if ds, err := cp.Clientset().AppsV1().Deployments(target).List(context.Background(), metav1.ListOptions{}); err != nil || len(ds.Items) != 0 {
			t.Fatalf("%d Deployments after the refusal (%v), want none", len(ds.Items), err)
		}
		if entries, err := os.ReadDir(receiptsDir); err != nil || len(entries) != 0 {
			t.Fatalf("receipts after the refusal: %d (%v), want none", len(entries), err)
		}
		for _, e := range cp.WritesBy(t, sa, target) {
			if !e.Review() && !e.DryRun() {
				t.Errorf("%s sent %s %s/%s after the refusal", sa, e.Verb, e.ObjectRef.Resource, e.ObjectRef.Name)
			}
		}
		t.Logf("refused: %s", msg)
	})
}

// withoutVerb is the printed RBAC (a v1 List as JSON) with verb taken
// out of the one rule that grants it: the Head's compare-and-swap update.
func withoutVerb(t *testing.T, printed []byte, verb string) []byte {
	t.Helper()
	var list struct {
		APIVersion string           `json:"apiVersion"`
		Kind       string           `json:"kind"`
		Items      []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(printed, &list); err != nil {
		t.Fatal(err)
	}
	removed := 0
	for _, it := range list.Items {
		rules, _ := it["rules"].([]any)
		for _, r := range rules {
			r := r.(map[string]any)
			var kept []any
			for _, v := range r["verbs"].([]any) {
				if v == verb {
					removed++
				} else {
					kept = append(kept, v)
				}
			}
			r["verbs"] = kept
		}
	}
	if removed != 1 {
		t.Fatalf("the print grants %q in %d rules, want 1:\n%s", verb, removed, printed)
	}
	out, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkWriters: the target's Head and objects were written by the
// ServiceAccount and no one else; it created the Head and applied the
// Deployments.
func checkWriters(t *testing.T, sa, target string) {
	t.Helper()
	evs, err := cp.Writes(func(e testcluster.AuditEvent) bool {
		return e.ObjectRef.Namespace == target && (e.ObjectRef.Resource == "configmaps" || e.ObjectRef.Resource == "deployments")
	})
	if err != nil {
		t.Fatal(err)
	}
	sent := map[string]int{}
	for _, e := range evs {
		if e.User.Username != sa {
			if e.User.Username == "system:kube-controller-manager" &&
				(e.ObjectRef.Subresource == "status" || e.ObjectRef.Name == "kube-root-ca.crt") {
				continue // the Deployments' status; the CA published into every namespace
			}
			t.Errorf("%s %s/%s written by %s, want only %s", e.Verb, e.ObjectRef.Resource, e.ObjectRef.Name, e.User.Username, sa)
			continue
		}
		if !e.DryRun() {
			sent[e.ObjectRef.Resource+":"+e.Verb]++
		}
	}
	for _, want := range []string{"configmaps:create", "configmaps:update", "deployments:patch"} {
		if sent[want] == 0 {
			t.Errorf("%s sent no %s to %s (sent %v)", sa, want, target, sent)
		}
	}
}

// releaseDir writes a release in target — the four Deployments a lock
// binds the production roles to, one running the workload image, the
// others none — and locks it with the release's binary, as the operator
// does before handing it to CI.
func releaseDir(t *testing.T, rel release, target string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "release")
	writeRelease(t, dir, target)
	rel.ql3(t, 0, "lock", dir, "--version", "1.0.0")
	return dir
}

// writeRelease writes releaseDir's release, unlocked, into dir.
func writeRelease(t *testing.T, dir, target string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	testkit.WriteFile(t, filepath.Join(dir, "kustomization.yaml"), []byte(fmt.Sprintf(
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: %s\nresources:\n- app.yaml\n", target)), 0o644)
	var docs []string
	for _, role := range []string{"control", "admin", "control-ai", "worker"} {
		replicas := 0
		if role == "control" {
			replicas = 1
		}
		docs = append(docs, fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, labels: {qinglong.io/role: %[1]s}}
spec:
  replicas: %[2]d
  selector: {matchLabels: {app.kubernetes.io/name: %[1]s}}
  template:
    metadata: {labels: {app.kubernetes.io/name: %[1]s}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - {name: app, image: %[3]q, imagePullPolicy: Never}
`, role, replicas, cp.Image(nodeimage.Workload)))
	}
	testkit.WriteFile(t, filepath.Join(dir, "app.yaml"), []byte(strings.Join(docs, "---\n")), 0o644)
}

// runJob creates, in ci, the guide's ServiceAccount, release ConfigMap and
// Job (the image goreleaser built), and waits until the Job completes or
// fails. Two things differ from the guide, both for the test cluster: the
// receipts volume is a hostPath directory on the one node (there is no
// storage provisioner) instead of the claim, returned for the test to read;
// and the pod uses the host's network with KUBERNETES_SERVICE_HOST/PORT set
// to the API server's loopback address, because nothing routes the
// kubernetes Service's ClusterIP here (no kube-proxy).
func runJob(t *testing.T, rel release, ci, dir string) (string, *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	cs := cp.Clientset()
	kubectl(t, nil, "-n", ci, "create", "serviceaccount", deployer)
	kubectl(t, nil, "-n", ci, "create", "configmap", "ql3-release", "--from-file="+dir)
	var job batchv1.Job
	if err := yaml.UnmarshalStrict([]byte(guideJob(t)), &job); err != nil {
		t.Fatalf("the guide's Job: %v", err)
	}
	mountsReleaseDir(t, &job)
	receipts := receiptsVolume(t)
	u, err := url.Parse(cp.URL)
	if err != nil {
		t.Fatal(err)
	}
	spec := &job.Spec.Template.Spec
	spec.HostNetwork = true
	env := []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: u.Hostname()}, {Name: "KUBERNETES_SERVICE_PORT", Value: u.Port()}}
	for _, cs := range []*corev1.Container{&spec.InitContainers[0], &spec.Containers[0]} {
		cs.Image, cs.ImagePullPolicy, cs.Env = rel.image, corev1.PullNever, env
	}
	dirType := corev1.HostPathDirectory
	for i := range spec.Volumes {
		if spec.Volumes[i].PersistentVolumeClaim != nil { // the receipts claim
			spec.Volumes[i].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: receipts, Type: &dirType}}
		}
	}
	if _, err := cs.BatchV1().Jobs(ci).Create(ctx, &job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var pod *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(ci).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job.Name})
		if err != nil || len(pods.Items) == 0 {
			return false, err
		}
		pod = &pods.Items[0]
		return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed, nil
	})
	if err != nil {
		t.Fatalf("Job %s/%s: %v; %s", ci, job.Name, err, describe(t, ci, pod))
	}
	t.Logf("Job pod %s after %s", pod.Status.Phase, time.Since(start).Round(time.Millisecond))
	return receipts, pod
}

// mountsReleaseDir checks that the guide's Job mounts the release ConfigMap
// as one directory, in both containers, not file by file with subPath: the
// Job then reads the kubelet's layout of links (app.yaml -> ..data/app.yaml,
// ..data -> ..<timestamp>), which preflight must accept against the lock.
func mountsReleaseDir(t *testing.T, job *batchv1.Job) {
	t.Helper()
	spec := &job.Spec.Template.Spec
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		var release []corev1.VolumeMount
		for _, m := range c.VolumeMounts {
			if m.Name == "release" {
				release = append(release, m)
			}
		}
		if len(release) != 1 || release[0].MountPath != "/release" || release[0].SubPath != "" {
			t.Fatalf("the guide's Job: container %s mounts the release as %+v, want one directory mount at /release without subPath", c.Name, release)
		}
	}
}

// receiptsVolume is a directory the image's user 65532 owns, on a path it
// can reach (t.TempDir's parents are 0700).
func receiptsVolume(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ql3-job-receipts-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	receipts := filepath.Join(dir, "receipts")
	if err := os.Mkdir(receipts, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(receipts, 65532, 65532); err != nil {
		t.Fatal(err)
	}
	return receipts
}

// guideJob is the Job manifest of docs/guide-ci-and-jobs.md (the block
// fenced as "yaml ql3-job").
func guideJob(t *testing.T) string {
	t.Helper()
	root, err := testkit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(mustRead(t, filepath.Join(root, "docs", "guide-ci-and-jobs.md"))), "\n```yaml ql3-job\n")
	block, _, ok2 := strings.Cut(after, "\n```\n")
	if !ok || !ok2 {
		t.Fatal("docs/guide-ci-and-jobs.md has no ```yaml ql3-job block")
	}
	return block
}

// exitCode is the exit code of the pod's container that failed, -1 if none.
func exitCode(p *corev1.Pod) int32 {
	for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if tm := c.State.Terminated; tm != nil && tm.ExitCode != 0 {
			return tm.ExitCode
		}
	}
	return -1
}

// describe is the pod's phase and each container's state and log (read
// through the API server), for a message.
func describe(t *testing.T, ns string, p *corev1.Pod) string {
	t.Helper()
	if p == nil {
		return "no pod"
	}
	var b strings.Builder
	b.WriteString(testcluster.DescribePods([]corev1.Pod{*p}))
	for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if tm := c.State.Terminated; tm != nil {
			fmt.Fprintf(&b, "\n%s exited %d; log:\n%s", c.Name, tm.ExitCode, cp.PodLog(t, ns, p.Name, c.Name))
		}
	}
	return b.String()
}
