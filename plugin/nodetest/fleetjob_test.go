package nodetest

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/plan"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
)

// fleetDriver is the management namespace's driver: it applies what
// `fleet job` prints with exactly the printed Role.
const fleetDriver = "fleet-driver"

// TestFleetWaveAsIndexedJob runs a fleet's waves on the real Job
// controller (docs/fleet.md §9). The node's cluster is the management
// cluster and, through namespaces, every target's cluster. The printed
// RBAC is applied by the admin; the driver, holding only the printed
// Role, creates the kubeconfig Secret and applies the printed ConfigMap
// and Job; each target's kubeconfig is a user bound to exactly what
// `kubectl ql3 rbac` prints for its release.
//
// Wave "first" (2 targets, maxParallel 2): the Job completes, one pod per
// index, every Head committed at the plan's generation, preflight and
// inventory digest, written only by its own deployer, the receipts audit.
// Wave "second" (maxParallel 1, maxFailures 0) whose index 0's Head was
// moved by someone else after the plan: that pod exits 3, the index fails
// by FailIndex with no retry (one pod), status.failedIndexes is "0", the
// Job fails with reason MaxFailedIndexesExceeded, and index 1 never runs:
// no pod, no Head, no write in its namespace.
func TestFleetWaveAsIndexedJob(t *testing.T) {
	rel := buildImage(t)
	mgmt := cp.Namespace(t)
	names := []string{"a", "b", "c", "d"}
	ns := map[string]string{}
	dir := t.TempDir()
	var fleetYAML strings.Builder
	fleetYAML.WriteString("schema: kubectl-ql3/fleet@v1\ntargets:\n")
	for _, n := range names {
		ns[n] = cp.Namespace(t)
		writeRelease(t, filepath.Join(dir, "releases", n), ns[n])
		fmt.Fprintf(&fleetYAML, "- name: %s\n  namespace: %s\n  release: releases/%s\n", n, ns[n], n)
	}
	fleetYAML.WriteString("waves:\n- name: first\n  selector:\n    names: [a, b]\n  maxParallel: 2\n" +
		"- name: second\n  selector:\n    names: [c, d]\n  maxParallel: 1\n")
	fleetFile := filepath.Join(dir, "fleet.yaml")
	testkit.WriteFile(t, fleetFile, []byte(fleetYAML.String()), 0o644)
	rel.ql3(t, 0, "fleet", "lock", fleetFile, "--version", "1.0.0")
	kubeconfigs := map[string]string{}
	for _, n := range names {
		user := "fleet-deployer-" + n
		kubectl(t, rel.ql3(t, 0, "rbac", filepath.Join(dir, "releases", n), "--bind-user", user), "apply", "-f", "-")
		path, err := cp.Kubeconfig(user)
		if err != nil {
			t.Fatal(err)
		}
		kubeconfigs[n] = path
	}
	rel.ql3(t, 0, "fleet", "preflight", fleetFile)
	p := readPlanFile(t, filepath.Join(dir, "plan", "plan.json"))

	kubectl(t, rel.ql3(t, 0, "fleet", "job", "--rbac", "-n", mgmt, "--bind-user", fleetDriver), "apply", "-f", "-")
	receipts := receiptsVolume(t)

	job := runWaveJob(t, rel, fleetFile, mgmt, p.Waves[0], kubeconfigs, receipts)
	if !jobCondition(job, batchv1.JobComplete) {
		t.Fatalf("wave first: the Job did not complete: %+v\n%s", job.Status, describeJob(t, mgmt, job))
	}
	pods := podsByIndex(t, mgmt, job)
	for i, n := range []string{"a", "b"} {
		if got := pods[fmt.Sprint(i)]; len(got) != 1 || got[0].Status.Phase != corev1.PodSucceeded {
			t.Fatalf("wave first, index %d (%s): %d pod(s), want one that succeeded\n%s", i, n, len(got), describeJob(t, mgmt, job))
		}
		pt, _, _ := p.Find(n)
		h := headIn(t, ns[n])
		if h == nil || h.Phase != deploy.PhaseCommitted || h.Generation != pt.Generation ||
			h.Transition.PreflightDigest != pt.PreflightDigest || h.Current.InventoryDigest != pt.InventoryDigest {
			t.Fatalf("target %s: Head %+v, want committed at the plan's generation %d, preflight %s, inventory %s", n, h, pt.Generation, pt.PreflightDigest, pt.InventoryDigest)
		}
		checkWriters(t, "fleet-deployer-"+n, ns[n])
		rel.ql3(t, 0, "receipt", "audit", filepath.Join(receipts, n), "--release", filepath.Join(dir, "releases", n))
	}

	// Someone else installs c's release as version 1.0.1 after the plan:
	// the plan's record for c, pinned to no Head, is now a conflict.
	other := t.TempDir()
	otherRel := filepath.Join(other, "release")
	writeRelease(t, otherRel, ns["c"])
	rel.ql3(t, 0, "lock", otherRel, "--version", "1.0.1")
	rel.ql3(t, 0, "preflight", otherRel, "--transition", "install", "--expected-head", "ql3h1-0-none", "--out", filepath.Join(other, "pf.json"))
	rel.ql3(t, 0, "apply", "--preflight", filepath.Join(other, "pf.json"), otherRel, "--receipts-dir", filepath.Join(other, "receipts"))
	moved := headIn(t, ns["c"])
	if pt, _, _ := p.Find("c"); moved == nil || moved.Transition.PreflightDigest == pt.PreflightDigest {
		t.Fatalf("target c: Head %+v, want one moved by another record than the plan's", moved)
	}

	job = runWaveJob(t, rel, fleetFile, mgmt, p.Waves[1], kubeconfigs, receipts)
	checkStoppedWave(t, mgmt, job, moved, ns)
}

// checkStoppedWave: index 0 failed once with exit 3 and was not retried,
// the Job failed at maxFailedIndexes, index 1 never ran.
func checkStoppedWave(t *testing.T, mgmt string, job *batchv1.Job, moved *deploy.Head, ns map[string]string) {
	t.Helper()
	if c := condition(job, batchv1.JobFailed); c == nil || c.Reason != batchv1.JobReasonMaxFailedIndexesExceeded {
		t.Fatalf("wave second: Failed condition %+v, want reason %s\n%s", c, batchv1.JobReasonMaxFailedIndexesExceeded, describeJob(t, mgmt, job))
	}
	if job.Status.FailedIndexes == nil || *job.Status.FailedIndexes != "0" {
		t.Fatalf("wave second: status.failedIndexes %v, want \"0\"", job.Status.FailedIndexes)
	}
	pods := podsByIndex(t, mgmt, job)
	if got := pods["0"]; len(got) != 1 || exitCode(&got[0]) != 3 {
		t.Fatalf("wave second, index 0: %d pod(s), want exactly one that exited 3\n%s", len(got), describeJob(t, mgmt, job))
	}
	if log := cp.PodLog(t, mgmt, pods["0"][0].Name, "apply"); !strings.Contains(log, "target c") {
		t.Fatalf("index 0's log does not name target c:\n%s", log)
	}
	if len(pods["1"]) != 0 || len(pods) != 1 {
		t.Fatalf("wave second: pods for indexes %v, want index 0's only", keys(pods))
	}
	if h := headIn(t, ns["c"]); h.Generation != moved.Generation || h.Transition.PreflightDigest != moved.Transition.PreflightDigest || h.Phase != moved.Phase {
		t.Fatalf("target c: Head moved by the Job: %+v, was %+v", h, moved)
	}
	if h := headIn(t, ns["d"]); h != nil {
		t.Fatalf("target d (index 1, never started): Head %+v, want none", h)
	}
	// d's deployer sent no request at all, anywhere; nobody else wrote
	// d's ConfigMaps or Deployments (the CA every namespace gets aside).
	evs, err := cp.Events(func(e testcluster.AuditEvent) bool { return e.User.Username == "fleet-deployer-d" })
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		t.Errorf("target d (never started): its deployer sent %s %s/%s in %q", e.Verb, e.ObjectRef.Resource, e.ObjectRef.Name, e.ObjectRef.Namespace)
	}
	evs, err = cp.Writes(func(e testcluster.AuditEvent) bool {
		return e.ObjectRef.Namespace == ns["d"] && (e.ObjectRef.Resource == "configmaps" || e.ObjectRef.Resource == "deployments")
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.ObjectRef.Name != "kube-root-ca.crt" {
			t.Errorf("target d (never started): %s sent %s %s/%s", e.User.Username, e.Verb, e.ObjectRef.Resource, e.ObjectRef.Name)
		}
	}
}

// runWaveJob prints wave's ConfigMap and Job with `fleet job`, has the
// driver (the printed Role) create the kubeconfig Secret (one key per
// target of the wave, named after it) and apply them, and waits until the
// Job completes or fails. Two things differ from the print, both for the
// test node, as in runJob: the pod uses the host's network (the
// kubeconfigs name the API server's loopback address), and the receipts
// volume is a hostPath directory instead of the claim.
func runWaveJob(t *testing.T, rel release, fleetFile, mgmt string, w plan.Wave, kubeconfigs map[string]string, receipts string) *batchv1.Job {
	t.Helper()
	printed := rel.ql3(t, 0, "fleet", "job", fleetFile, "--wave", w.Name, "-n", mgmt, "--image", rel.image)
	var out bytes.Buffer
	var job batchv1.Job
	for _, doc := range strings.Split(string(printed), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		if meta.Kind != "Job" {
			out.WriteString(doc + "\n---\n")
			continue
		}
		if err := yaml.UnmarshalStrict([]byte(doc), &job); err != nil {
			t.Fatalf("the printed Job: %v", err)
		}
	}
	checkPrintedJob(t, &job, w)
	dirType := corev1.HostPathDirectory
	spec := &job.Spec.Template.Spec
	spec.HostNetwork = true
	for i := range spec.Volumes {
		if spec.Volumes[i].PersistentVolumeClaim != nil {
			spec.Volumes[i].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: receipts, Type: &dirType}}
		}
	}
	jb, err := yaml.Marshal(&job)
	if err != nil {
		t.Fatal(err)
	}
	out.Write(jb)
	driver, err := cp.Kubeconfig(fleetDriver)
	if err != nil {
		t.Fatal(err)
	}
	secret := []string{"--kubeconfig", driver, "-n", mgmt, "create", "secret", "generic", job.Name + "-kubeconfigs"}
	for _, pt := range w.Targets {
		secret = append(secret, "--from-file="+pt.Name+"="+kubeconfigs[pt.Name])
	}
	kubectl(t, nil, secret...)
	kubectl(t, out.Bytes(), "--kubeconfig", driver, "apply", "-f", "-")
	return waitJob(t, mgmt, job.Name)
}

// checkPrintedJob: the fields docs/fleet.md §9 names, as printed.
func checkPrintedJob(t *testing.T, job *batchv1.Job, w plan.Wave) {
	t.Helper()
	s := job.Spec
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion || s.Completions == nil || *s.Completions != int32(len(w.Targets)) ||
		s.Parallelism == nil || *s.Parallelism != int32(w.MaxParallel) ||
		s.BackoffLimitPerIndex == nil || *s.BackoffLimitPerIndex != 2 || s.MaxFailedIndexes == nil || *s.MaxFailedIndexes != 0 ||
		s.PodFailurePolicy == nil || len(s.PodFailurePolicy.Rules) != 3 || s.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Fatalf("printed Job spec: %+v", s)
	}
	if tok := s.Template.Spec.AutomountServiceAccountToken; tok == nil || *tok {
		t.Fatal("the printed pod mounts an API token; it needs none")
	}
}

// waitJob polls the Job until it has a Complete or Failed condition.
func waitJob(t *testing.T, ns, name string) *batchv1.Job {
	t.Helper()
	var job *batchv1.Job
	start := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		j, err := cp.Clientset().BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		job = j
		return jobCondition(j, batchv1.JobComplete) || jobCondition(j, batchv1.JobFailed), nil
	})
	if err != nil {
		t.Fatalf("Job %s/%s: %v\n%s", ns, name, err, describeJob(t, ns, job))
	}
	t.Logf("Job %s finished after %s: %+v", name, time.Since(start).Round(time.Millisecond), job.Status)
	return job
}

func condition(j *batchv1.Job, typ batchv1.JobConditionType) *batchv1.JobCondition {
	for i, c := range j.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

func jobCondition(j *batchv1.Job, typ batchv1.JobConditionType) bool { return condition(j, typ) != nil }

// podsByIndex are the Job's pods by completion index.
func podsByIndex(t *testing.T, ns string, job *batchv1.Job) map[string][]corev1.Pod {
	t.Helper()
	pods, err := cp.Clientset().CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "job-name=" + job.Name})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]corev1.Pod{}
	for _, p := range pods.Items {
		i := p.Annotations[batchv1.JobCompletionIndexAnnotation]
		out[i] = append(out[i], p)
	}
	return out
}

func keys(m map[string][]corev1.Pod) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// describeJob is every pod of the Job, described with its logs.
func describeJob(t *testing.T, ns string, job *batchv1.Job) string {
	t.Helper()
	if job == nil {
		return "no Job"
	}
	var b strings.Builder
	for i, ps := range podsByIndex(t, ns, job) {
		for _, p := range ps {
			fmt.Fprintf(&b, "index %s: %s\n", i, describe(t, ns, &p))
		}
	}
	return b.String()
}

func headIn(t *testing.T, ns string) *deploy.Head {
	t.Helper()
	cl, err := deploy.NewKubeCluster(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	h, err := deploy.ReadHead(context.Background(), cl, ns)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func readPlanFile(t *testing.T, path string) *plan.Plan {
	t.Helper()
	p, err := plan.Parse(path, mustRead(t, path))
	if err != nil {
		t.Fatal(err)
	}
	return p
}
