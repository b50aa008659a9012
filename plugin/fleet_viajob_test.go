package plugin_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/ceremony/fleet"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
)

// `fleet apply --via-job` waits on a running Job of this plan only when it
// is the Job the command would create (a killed driver's). Written as the
// attacker: whoever holds exactly the printed driver Role can create, in
// the management namespace, a Job named and annotated as the wave's with
// another image, suspended, with a command of its own or another container
// (fields the command's Job leaves unset), the wave's Job beside a
// ConfigMap of other files, or the wave's Job with its spec patched and
// patched back (what ran meanwhile was not the plan's). The driver refuses
// each at once (exit 3, naming what differs) instead of waiting on it
// (before the fix it waited, here forever: nothing runs the pods). The Job
// as printed by `fleet job` is waited on: the driver reads it until it is
// deleted.
func TestCLIFleetViaJobAdoptsOnlyItsOwnJob(t *testing.T) {
	user := "fleet-driver-adopt"
	file, mgmt, image, apply, attacker := viaJobFleet(t, user)
	printed := mustRunOK(t, "fleet", "job", file, "--wave", "first", "-n", mgmt, "--image", image)
	for _, c := range []struct {
		name, want string
		forge      func(cm *corev1.ConfigMap, job *batchv1.Job) // before it is created
		patches    []string                                     // merge patches of the Job once created
	}{
		{"another image", "its spec", func(_ *corev1.ConfigMap, job *batchv1.Job) {
			job.Spec.Template.Spec.Containers[0].Image = "registry.example/other@sha256:" + strings.Repeat("b", 64)
		}, nil},
		{"suspended", "its spec.suspend", func(_ *corev1.ConfigMap, job *batchv1.Job) {
			yes := true
			job.Spec.Suspend = &yes
		}, nil},
		{"a command of its own", "its spec.template.spec.containers", func(_ *corev1.ConfigMap, job *batchv1.Job) {
			job.Spec.Template.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "cat /kubeconfigs/*"}
		}, nil},
		{"another container", "its spec.template.spec.containers", func(_ *corev1.ConfigMap, job *batchv1.Job) {
			c := job.Spec.Template.Spec.Containers
			job.Spec.Template.Spec.Containers = append(c, corev1.Container{Name: "extra", Image: c[0].Image, VolumeMounts: c[0].VolumeMounts})
		}, nil},
		{"other files", "the files of its ConfigMap", func(cm *corev1.ConfigMap, _ *batchv1.Job) {
			cm.Data[key(t, cm)] += "\n# not the plan's\n"
		}, nil},
		{"suspended and put back", "its spec was changed after it was created (generation 3", nil, []string{`{"spec":{"suspend":true}}`, `{"spec":{"suspend":false}}`}},
	} {
		cm, job := printedJob(t, printed)
		if c.forge != nil {
			c.forge(cm, job)
		}
		createAs(t, attacker, cm, job)
		for _, p := range c.patches {
			if _, err := attacker.BatchV1().Jobs(mgmt).Patch(context.Background(), job.Name, types.MergePatchType, []byte(p), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		_, stderr, code := runBounded(t, 90*time.Second, nil, apply...)
		if code != 3 || !strings.Contains(stderr, "differs from the Job this command would create") || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "waiting on it") {
			t.Fatalf("%s: exit %d, want 3 naming %q, without waiting\n%s", c.name, code, c.want, stderr)
		}
		deleteJob(t, cm, job)
	}

	anotherPlansJobIsLeft(t, printed, attacker, apply)

	cm, job := printedJob(t, printed)
	reads := func() (int, error) {
		reads, err := cp.Reads(func(e testcluster.AuditEvent) bool {
			return e.User.Username == user && e.Verb == "get" && e.ObjectRef.Resource == "jobs" && e.ObjectRef.Namespace == mgmt && e.ObjectRef.Name == job.Name
		})
		return len(reads), err
	}
	before, err := reads() // the forged cases' reads
	if err != nil {
		t.Fatal(err)
	}
	createAs(t, attacker, cm, job)
	var wg sync.WaitGroup
	var stderr string
	var code int
	wg.Go(func() { _, stderr, code = runBounded(t, 3*time.Minute, nil, apply...) })
	gets := func(ctx context.Context) (bool, error) {
		n, err := reads()
		return n >= before+3, err // start's read, then wait's
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, gets); err != nil {
		t.Fatalf("the driver did not wait on the printed Job: %v", err)
	}
	deleteJob(t, cm, job)
	wg.Wait()
	if code != 3 || !strings.Contains(stderr, "of this plan is running: waiting on it") || !strings.Contains(stderr, "was deleted while this driver waited on it") {
		t.Fatalf("the printed Job: exit %d, want it waited on until deleted (3)\n%s", code, stderr)
	}
}

// anotherPlansJobIsLeft: a running Job of another plan is someone's run,
// neither waited on nor deleted (before, it was deleted, its pods with it).
func anotherPlansJobIsLeft(t *testing.T, printed string, attacker kubernetes.Interface, apply []string) {
	t.Helper()
	cm, job := printedJob(t, printed)
	job.Annotations[fleet.AnnotationPlan] = "sha256:" + strings.Repeat("c", 64)
	createAs(t, attacker, cm, job)
	_, stderr, code := runBounded(t, 90*time.Second, nil, apply...)
	if code != 3 || !strings.Contains(stderr, "is running and is not this plan's") || strings.Contains(stderr, "waiting on it") {
		t.Fatalf("a running Job of another plan: exit %d, want 3 naming it, without waiting\n%s", code, stderr)
	}
	if got, err := cp.Clientset().BatchV1().Jobs(job.Namespace).Get(context.Background(), job.Name, metav1.GetOptions{}); err != nil || got.Annotations[fleet.AnnotationPlan] != job.Annotations[fleet.AnnotationPlan] {
		t.Fatalf("the other plan's running Job: %v, want it left in place", err)
	}
	deleteJob(t, cm, job)
}

// printedJob parses `fleet job`'s output: its ConfigMap and its Job.
func printedJob(t *testing.T, printed string) (*corev1.ConfigMap, *batchv1.Job) {
	t.Helper()
	docs := strings.Split(printed, "\n---\n")
	var cm corev1.ConfigMap
	var job batchv1.Job
	if len(docs) != 2 || yaml.UnmarshalStrict([]byte(docs[0]), &cm) != nil || yaml.UnmarshalStrict([]byte(docs[1]), &job) != nil {
		t.Fatalf("fleet job: want a ConfigMap and a Job:\n%s", printed)
	}
	return &cm, &job
}

// key is the first of cm's data keys (sorted).
func key(t *testing.T, cm *corev1.ConfigMap) string {
	t.Helper()
	keys := slices.Sorted(maps.Keys(cm.Data))
	if len(keys) == 0 {
		t.Fatalf("ConfigMap %s holds no data", cm.Name)
	}
	return keys[0]
}

// createAs creates cm and job with cs.
func createAs(t *testing.T, cs kubernetes.Interface, cm *corev1.ConfigMap, job *batchv1.Job) {
	t.Helper()
	ctx := context.Background()
	if _, err := cs.CoreV1().ConfigMaps(cm.Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.BatchV1().Jobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// deleteJob deletes cm and job as the admin, and waits until the Job is gone.
func deleteJob(t *testing.T, cm *corev1.ConfigMap, job *batchv1.Job) {
	t.Helper()
	ctx := context.Background()
	cs := cp.Clientset()
	bg := metav1.DeletePropagationBackground
	if err := cs.BatchV1().Jobs(job.Namespace).Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ConfigMaps(cm.Namespace).Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
		return err != nil, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// The class of a failed index is its own pod's exit code, never a pod of
// someone else's Job that merely carries the Job's labels. Written as the
// attacker: with exactly the printed driver Role, while the driver waits
// on its wave's Job, a second Job (manualSelector) whose pods carry the
// first Job's controller-uid label and completion index, its pod exiting
// 4 ("unavailable: retry") after the wave's own pod exited 3 (conflict).
// There is no node here: the test writes both pods' terminated status as
// their kubelet would (the attacker cannot: pods/status is not in the
// Role). The driver reports index 0 as exit 3, its own pod's (before the
// fix it read the attacker's later pod: exit 4).
func TestCLIFleetViaJobJudgesOnlyItsOwnPods(t *testing.T) {
	_, mgmt, image, apply, attacker := viaJobFleet(t, "fleet-driver-judge")
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ql3-fleet-first-kubeconfigs"}, Data: map[string][]byte{"t0": []byte("unused: no pod runs here")}}
	if _, err := cp.Clientset().CoreV1().Secrets(mgmt).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var stderr string
	var code int
	wg.Go(func() { _, stderr, code = runBounded(t, 3*time.Minute, nil, apply...) })
	own := onePod(t, mgmt, "batch.kubernetes.io/job-name=ql3-fleet-first") // only the driver's Job exists yet
	ref := metav1.GetControllerOf(own)
	if ref == nil {
		t.Fatalf("pod %s has no controller", own.Name)
	}
	uid := string(ref.UID)

	yes, one := true, int32(1)
	indexed := batchv1.IndexedCompletion
	labels := map[string]string{"batch.kubernetes.io/controller-uid": uid, "forged": "yes"}
	forged := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "zz-forged", Namespace: mgmt},
		Spec: batchv1.JobSpec{ManualSelector: &yes, Selector: &metav1.LabelSelector{MatchLabels: labels}, Completions: &one, CompletionMode: &indexed, BackoffLimit: new(int32),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: fleet.JobContainer, Image: image}}}}}}
	if _, err := attacker.BatchV1().Jobs(mgmt).Create(ctx, forged, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the printed Role creates a Job with manualSelector: %v", err)
	}
	theirs := onePod(t, mgmt, "forged=yes")
	kubeletExit(t, theirs, 4, time.Now().Add(time.Minute))
	kubeletExit(t, own, 3, time.Now())
	wg.Wait()
	if code != 3 || !strings.Contains(stderr, "index 0 failed in Job "+mgmt+"/ql3-fleet-first (its last pod exited 3;") {
		t.Fatalf("fleet apply --via-job: exit %d, want 3 from its own pod's exit 3\n%s", code, stderr)
	}
}

// onePod waits until exactly one pod in ns matches selector.
func onePod(t *testing.T, ns, selector string) *corev1.Pod {
	t.Helper()
	return &cp.WaitPods(t, ns, selector, 2*time.Minute, func(p []corev1.Pod) bool { return len(p) == 1 })[0]
}

// viaJobFleet is cliFleet's fleet locked and preflighted, a management
// namespace with the printed driver Role bound to user, an image
// reference, the `fleet apply --via-job` command line of the driver (as
// user) and a client holding that Role and nothing more: the attacker.
func viaJobFleet(t *testing.T, user string) (file, mgmt, image string, apply []string, attacker kubernetes.Interface) {
	t.Helper()
	_, file = cliFleet(t)
	mustRunOK(t, "fleet", "lock", file, "--version", "3.0.0")
	mustRunOK(t, "fleet", "preflight", file)
	mgmt = cp.Namespace(t)
	cp.KubectlApply(t, mustRunOK(t, "fleet", "job", "--rbac", "-n", mgmt, "--bind-user", user))
	driver, err := cp.Kubeconfig(user)
	if err != nil {
		t.Fatal(err)
	}
	image = "registry.example/kubectl-ql3:v0.1.0@sha256:" + strings.Repeat("a", 64)
	apply = []string{"fleet", "apply", file, "--via-job", "-n", mgmt, "--image", image, "--job-kubeconfig", driver, "--progress", "always"}
	return file, mgmt, image, apply, kubernetes.NewForConfigOrDie(cp.User(t, user))
}

// kubeletExit writes what a kubelet writes when pod's only container
// exits with code at finished (there is no node here).
func kubeletExit(t *testing.T, pod *corev1.Pod, code int32, finished time.Time) {
	t.Helper()
	at := metav1.NewTime(finished)
	pod.Status.Phase = corev1.PodFailed
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: pod.Spec.Containers[0].Name, Image: pod.Spec.Containers[0].Image,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error", StartedAt: at, FinishedAt: at}}}}
	if _, err := cp.Clientset().CoreV1().Pods(pod.Namespace).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("pod %s's status: %v", pod.Name, err)
	}
}
