package nodetest

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/qinglong/kubectl-ql3/ceremony/fleet"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
)

// `fleet apply --via-job` (docs/fleet.md §9.5): the driver, on the host,
// reaches the management namespace with exactly the printed Role and the
// targets with its own kubeconfig. It creates each wave's Job as `fleet
// job` prints it — unchanged: the receipts claim is the printed one,
// bound to a hostPath volume, and an admission policy of the test cluster
// gives the fleet's pods the host's network — waits on it, and reads every
// target back. Wave first (a, b) completes: both Heads at the plan, their
// receipts audit. Wave second's only target c had its Head moved after
// the plan: its index fails (exit 3), the fleet stops with exit 3 naming
// c. A rerun creates no Job for wave first (already at the plan) and
// stops at c again.
func TestFleetApplyViaJob(t *testing.T) {
	rel := buildImage(t)
	mgmt := cp.Namespace(t)
	names := []string{"a", "b", "c"}
	ns := map[string]string{}
	dir := t.TempDir()
	var fy strings.Builder
	fy.WriteString("schema: kubectl-ql3/fleet@v1\ntargets:\n")
	for _, n := range names {
		ns[n] = cp.Namespace(t)
		writeRelease(t, filepath.Join(dir, "releases", n), ns[n])
		fmt.Fprintf(&fy, "- name: %s\n  namespace: %s\n  release: releases/%s\n", n, ns[n], n)
	}
	fy.WriteString("waves:\n- name: first\n  selector:\n    names: [a, b]\n  maxParallel: 2\n- name: second\n  selector:\n    names: [c]\n")
	fleetFile := filepath.Join(dir, "fleet.yaml")
	testkit.WriteFile(t, fleetFile, []byte(fy.String()), 0o644)
	rel.ql3(t, 0, "fleet", "lock", fleetFile, "--version", "1.0.0")
	secret := map[string][]string{} // wave: --from-file flags
	for _, n := range names {
		user := "viajob-deployer-" + n
		kubectl(t, rel.ql3(t, 0, "rbac", filepath.Join(dir, "releases", n), "--bind-user", user), "apply", "-f", "-")
		path, err := cp.Kubeconfig(user)
		if err != nil {
			t.Fatal(err)
		}
		wave := "first"
		if n == "c" {
			wave = "second"
		}
		secret[wave] = append(secret[wave], "--from-file="+n+"="+path)
	}
	rel.ql3(t, 0, "fleet", "preflight", fleetFile)
	p := readPlanFile(t, filepath.Join(dir, "plan", "plan.json"))

	kubectl(t, rel.ql3(t, 0, "fleet", "job", "--rbac", "-n", mgmt, "--bind-user", fleetDriver), "apply", "-f", "-")
	receipts := receiptsClaim(t, mgmt)
	hostNetworkForFleetPods(t, mgmt)
	driver, err := cp.Kubeconfig(fleetDriver)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"first", "second"} {
		kubectl(t, nil, append([]string{"--kubeconfig", driver, "-n", mgmt, "create", "secret", "generic", "ql3-fleet-" + w + "-kubeconfigs"}, secret[w]...)...)
	}
	moveHead(t, rel, ns["c"])

	apply := []string{"fleet", "apply", fleetFile, "--via-job", "-n", mgmt, "--image", rel.image, "--job-kubeconfig", driver, "-o", "json"}
	rep := viaJob(t, rel, apply)
	for _, n := range []string{"a", "b"} {
		pt, _, _ := p.Find(n)
		h := headIn(t, ns[n])
		if h == nil || h.Generation != pt.Generation || h.Transition.PreflightDigest != pt.PreflightDigest || h.Current.InventoryDigest != pt.InventoryDigest {
			t.Fatalf("target %s: Head %+v, want the plan's", n, h)
		}
		checkWriters(t, "viajob-deployer-"+n, ns[n])
		rel.ql3(t, 0, "receipt", "audit", filepath.Join(receipts, n), "--release", filepath.Join(dir, "releases", n))
	}
	first := jobIn(t, mgmt, "ql3-fleet-first")
	if rep.Waves[0].State != fleet.WaveDone || rep.Waves[1].State != fleet.WaveStopped || !jobCondition(first, batchv1.JobComplete) ||
		first.Annotations[fleet.AnnotationPlan] != p.SelfDigest {
		t.Fatalf("report %+v; Job first %+v", rep, first.Status)
	}
	if c := rep.Waves[1].Targets[0]; c.Name != "c" || c.Exit != 3 || !strings.Contains(c.Error, "index 0 failed in Job") {
		t.Fatalf("wave second, c: %+v, want failed with exit 3 in its Job's index 0", c)
	}
	if c := condition(jobIn(t, mgmt, "ql3-fleet-second"), batchv1.JobFailed); c == nil || c.Reason != batchv1.JobReasonMaxFailedIndexesExceeded {
		t.Fatalf("Job second: Failed condition %+v", c)
	}

	rep = viaJob(t, rel, apply)
	if again := jobIn(t, mgmt, "ql3-fleet-first"); again.UID != first.UID || rep.Waves[0].Targets[0].State != fleet.StateAlreadyCommitted {
		t.Fatalf("the rerun: wave first %+v, Job %s (was %s): want already committed, no new Job", rep.Waves[0], again.UID, first.UID)
	}
}

// viaJob runs apply (exit 3: c's Head moved) and reads its -o json report.
func viaJob(t *testing.T, rel release, apply []string) fleet.ApplyReport {
	t.Helper()
	start := time.Now()
	var rep fleet.ApplyReport
	if err := json.Unmarshal(rel.ql3(t, 3, apply...), &rep); err != nil || len(rep.Waves) != 2 {
		t.Fatalf("fleet apply --via-job -o json: %v (%+v)", err, rep)
	}
	t.Logf("fleet apply --via-job: %s", time.Since(start).Round(time.Millisecond))
	return rep
}

// moveHead has someone else install release 1.0.1 in ns after the plan.
func moveHead(t *testing.T, rel release, ns string) {
	t.Helper()
	other := t.TempDir()
	dir := filepath.Join(other, "release")
	writeRelease(t, dir, ns)
	rel.ql3(t, 0, "lock", dir, "--version", "1.0.1")
	rel.ql3(t, 0, "preflight", dir, "--transition", "install", "--expected-head", "ql3h1-0-none", "--out", filepath.Join(other, "pf.json"))
	rel.ql3(t, 0, "apply", "--preflight", filepath.Join(other, "pf.json"), dir, "--receipts-dir", filepath.Join(other, "receipts"))
}

func jobIn(t *testing.T, ns, name string) *batchv1.Job {
	t.Helper()
	j, err := cp.Clientset().BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// receiptsClaim makes the printed claim ql3-fleet-receipts in ns, bound
// to a hostPath PersistentVolume on a directory the image's user owns
// (no provisioner here), and returns the directory.
func receiptsClaim(t *testing.T, ns string) string {
	t.Helper()
	ctx := context.Background()
	dir := receiptsVolume(t)
	pv := "ql3-receipts-" + ns
	dirType := corev1.HostPathDirectory
	size := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Mi")}
	cs := cp.Clientset()
	if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pv},
		Spec: corev1.PersistentVolumeSpec{Capacity: size, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &dirType}},
			ClaimRef:               &corev1.ObjectReference{Namespace: ns, Name: fleet.DefaultReceiptsClaim}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().PersistentVolumes().Delete(context.Background(), pv, metav1.DeleteOptions{}) })
	empty := ""
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: fleet.DefaultReceiptsClaim},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeName: pv, StorageClassName: &empty,
			Resources: corev1.VolumeResourceRequirements{Requests: size}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// hostNetworkForFleetPods installs a MutatingAdmissionPolicy that gives
// the fleet's pods in ns the host's network (the kubeconfigs name the API
// server's loopback address; nothing else routes to it here), and waits
// until a dry-run pod shows it enforced.
func hostNetworkForFleetPods(t *testing.T, ns string) {
	t.Helper()
	name := "ql3-hostnetwork-" + ns
	kubectl(t, []byte(fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: %[1]s}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  matchConditions:
  - name: fleet-pod
    expression: "has(object.metadata.labels) && 'app.kubernetes.io/name' in object.metadata.labels && object.metadata.labels['app.kubernetes.io/name'] == 'kubectl-ql3-fleet'"
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: "Object{spec: Object.spec{hostNetwork: true}}"
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: %[1]s}
spec:
  policyName: %[1]s
  matchResources:
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: %[2]s}
`, name, ns)), "apply", "-f", "-")
	t.Cleanup(func() {
		kubectl(t, nil, "delete", "mutatingadmissionpolicybinding,mutatingadmissionpolicy", name)
	})
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Labels: map[string]string{"app.kubernetes.io/name": "kubectl-ql3-fleet"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := cp.Clientset().CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && got.Spec.HostNetwork, nil
	})
	if err != nil {
		t.Fatalf("the admission policy is not enforced: %v", err)
	}
}
