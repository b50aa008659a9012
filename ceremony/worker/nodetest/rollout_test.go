package nodetest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/qinglong/kubectl-ql3/ceremony/worker"
	"github.com/qinglong/kubectl-ql3/ceremony/worker/audit"
	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
)

const selector = worker.RoleLabel + "=" + worker.RoleValue

// run is one Worker pod seen running: the pod, its process's log and its
// initContainer's.
type run struct {
	pod          corev1.Pod
	log, initLog string
}

// waitRunning waits (GET polling) for a Worker pod other than prev, not
// being deleted and Ready, whose process has logged that it serves, and
// reads its logs through the API server.
func waitRunning(t *testing.T, ns, prev string) run {
	t.Helper()
	var r run
	cp.WaitPods(t, ns, selector, 2*time.Minute, func(pods []corev1.Pod) bool {
		for _, p := range pods {
			if p.Name != prev && p.DeletionTimestamp == nil && testcluster.PodReady(p) {
				r.pod = p
				return true
			}
		}
		return false
	})
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		r.log = cp.PodLog(t, ns, r.pod.Name, "worker")
		return strings.Contains(r.log, "serving on "), nil
	})
	if err != nil {
		t.Fatalf("pod %s: its process never logged that it serves: %v; log %q", r.pod.Name, err, r.log)
	}
	r.initLog = cp.PodLog(t, ns, r.pod.Name, "private-copy")
	return r
}

var recordLine = regexp.MustCompile(`record /var/lib/qinglong/runs: (\d+) earlier runs, the last stopped (\S+); lock ([^;]+); started (\S+)\n`)

// check says that r's process runs with tok, copied into the 0700 private/
// directory, that it found runs earlier runs on the claim, the lock free,
// and (after the first) the previous run stopped before it started; it
// returns when the previous run stopped and this one started.
func check(t *testing.T, r run, tok []byte, runs int) (stopped, started time.Time) {
	t.Helper()
	if want := fmt.Sprintf("digest %s %s\n", credFile, digest(tok)); !strings.Contains(r.log, want) {
		t.Fatalf("pod %s log %q: want %q", r.pod.Name, r.log, want)
	}
	for _, want := range []string{"directory /run/ql3/memory/private mode 0700\n", fmt.Sprintf("copied %s %s\n", credFile, digest(tok))} {
		if !strings.Contains(r.initLog, want) {
			t.Fatalf("pod %s initContainer log %q: want %q", r.pod.Name, r.initLog, want)
		}
	}
	m := recordLine.FindStringSubmatch(r.log)
	if m == nil {
		t.Fatalf("pod %s log %q: no record line", r.pod.Name, r.log)
	}
	if n, _ := strconv.Atoi(m[1]); n != runs || m[3] != "free" {
		t.Fatalf("pod %s: %s; want %d earlier runs on the claim and the lock free", r.pod.Name, m[0], runs)
	}
	started, err := time.Parse(time.RFC3339Nano, m[4])
	if err != nil {
		t.Fatal(err)
	}
	if runs == 0 {
		if m[2] != "never" {
			t.Fatalf("pod %s: %s; want no earlier stop", r.pod.Name, m[0])
		}
		return time.Time{}, started
	}
	if stopped, err = time.Parse(time.RFC3339Nano, m[2]); err != nil || !stopped.Before(started) {
		t.Fatalf("pod %s: %s: the previous run must have stopped before this one started (%v)", r.pod.Name, m[0], err)
	}
	return stopped, started
}

// replaced waits until the pod prev is gone from the API, then reads from
// the audit log when its deletion began and ended and when next was
// created: the deletion must have begun before the create (Recreate), and
// prev must have left the API before next's process started (started).
func replaced(t *testing.T, ns, prev, next string, started time.Time) (begun, gone, created time.Time) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cp.Clientset().CoreV1().Pods(ns).Get(ctx, prev, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("pod %s never went: %v", prev, err)
	}
	evs, err := cp.Writes(func(e testcluster.AuditEvent) bool {
		return e.ObjectRef.Namespace == ns && e.ObjectRef.Resource == "pods" && (e.ObjectRef.Name == prev || e.ObjectRef.Name == next)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		switch {
		case e.Verb == "delete" && e.ObjectRef.Name == prev && e.ResponseStatus.Code == 200:
			if begun.IsZero() {
				begun = e.StageTimestamp
			}
			gone = e.StageTimestamp
		case e.Verb == "create" && e.ResponseStatus.Code == 201:
			created = e.StageTimestamp
		}
	}
	if begun.IsZero() || created.IsZero() || !begun.Before(created) {
		t.Fatalf("pod %s deleted from %v, pod %s created %v: want the old deleted before the new was created", prev, begun, next, created)
	}
	if !gone.Before(started) {
		t.Fatalf("pod %s left the API at %v, after pod %s's process started at %v", prev, gone, next, started)
	}
	return begun, gone, created
}

// bootstrap: the documented Worker, deployed before any publish, waits:
// its pod cannot mount the credential Secret that does not exist yet.
func bootstrap(t *testing.T, ns string) string {
	t.Helper()
	var pod string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		evs, err := cp.Clientset().CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == "FailedMount" && strings.Contains(e.Message, `"`+delivery.SecretName+`" not found`) {
				pod = e.InvolvedObject.Name
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no FailedMount event for the missing credential Secret: %v", err)
	}
	p, err := cp.Clientset().CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil || p.Status.Phase != corev1.PodPending {
		t.Fatalf("pod %s before the first publish: %v, %v; want Pending", pod, p.Status.Phase, err)
	}
	return pod
}

// TestCredentialRollout publishes A → B → C and checks each on the
// running Worker; publishes D through the plugin killed between its two
// writes, then reruns it; then does the same job by hand (replace the
// Secret, kubectl rollout restart, kubectl rollout status) and compares.
func TestCredentialRollout(t *testing.T) {
	ns, stageNS := cp.Namespace(t), cp.Namespace(t)
	deployWorker(t, ns)
	prev := bootstrap(t, ns)
	o := options(t, ns, stageNS)
	steps := []struct {
		d   *delivery.Delivery
		tok []byte
	}{
		{newDelivery(t, o, "d-a", "cred-a", nil, 1), token("A")},
		{newDelivery(t, o, "d-b", "cred-b", ptr("cred-a"), 2), token("B")},
		{newDelivery(t, o, "d-c", "cred-c", ptr("cred-b"), 3), token("C")},
	}
	var runs []run
	var took []time.Duration
	for i, s := range steps {
		if _, err := worker.Stage(context.Background(), o, s.d, s.tok); err != nil {
			t.Fatalf("stage %s: %v", s.d.DeliveryID, err)
		}
		start := time.Now()
		if _, err := worker.Publish(context.Background(), o, s.d); err != nil {
			t.Fatalf("publish %s: %v", s.d.DeliveryID, err)
		}
		published := time.Since(start)
		r := waitRunning(t, ns, prev)
		took = append(took, time.Since(start))
		stopped, started := check(t, r, s.tok, i)
		begun, gone, created := replaced(t, ns, prev, r.pod.Name, started)
		stop := "no earlier process"
		if i > 0 {
			stop = "old process stopped " + started.Sub(stopped).Round(time.Millisecond).String() + " before the new one started"
		}
		t.Logf("%s: publish returned after %s; credential %s running after %s; old pod deletion began %s before the new pod was created; %s; old pod gone from the API %s before the new process started",
			s.d.CredentialID, published.Round(time.Millisecond), s.d.CredentialID, took[i].Round(time.Millisecond),
			created.Sub(begun).Round(time.Millisecond), stop, started.Sub(gone).Round(time.Millisecond))
		runs, prev = append(runs, r), r.pod.Name
	}
	liveAudit(t, ns)

	d := newDelivery(t, o, "d-d", "cred-d", ptr("cred-c"), 4)
	r, rerun := crashAndRerun(t, buildCLI(t), ns, stageNS, prev, d, token("D"))
	_, started := check(t, r, token("D"), len(steps))
	replaced(t, ns, prev, r.pod.Name, started)
	t.Logf("cred-d: publish killed between its writes left %s running; the rerun had cred-d running after %s", prev, rerun.Round(time.Millisecond))
	runs, prev = append(runs, r), r.pod.Name

	byHand, r := rolloutByHand(t, ns, prev, token("E"))
	check(t, r, token("E"), len(steps)+1)
	runs = append(runs, r)
	for i, s := range steps {
		t.Logf("ratio %s: publish → running %s / by hand %s = %.2f", s.d.CredentialID, took[i].Round(time.Millisecond), byHand.Round(time.Millisecond), float64(took[i])/float64(byHand))
	}
	noToken(t, ns, stageNS, runs, token("A"), token("B"), token("C"), token("D"), token("E"))
}

func ptr(s string) *string { return &s }

// rolloutByHand is the job without the ceremony: replace the Secret,
// kubectl rollout restart, kubectl rollout status, until the process runs
// with tok.
func rolloutByHand(t *testing.T, ns, prev string, tok []byte) (time.Duration, run) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, tok, 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	secret := kubectl(t, nil, "-n", ns, "create", "secret", "generic", delivery.SecretName,
		"--from-file="+delivery.SecretKey+"="+f, "--dry-run=client", "-o", "yaml")
	kubectl(t, secret, "-n", ns, "replace", "-f", "-")
	kubectl(t, nil, "-n", ns, "rollout", "restart", "deployment/"+depName)
	kubectl(t, nil, "-n", ns, "rollout", "status", "deployment/"+depName, "--timeout=2m")
	r := waitRunning(t, ns, prev)
	took := time.Since(start)
	t.Logf("by hand: credential running after %s", took.Round(time.Millisecond))
	return took, r
}

// liveAudit: the Worker the test ran passes `worker audit` in live mode.
func liveAudit(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	dep, err := cp.Clientset().AppsV1().Deployments(ns).Get(ctx, depName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pvc, err := cp.Clientset().CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvcName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dep.APIVersion, dep.Kind = "apps/v1", "Deployment"
	pvc.APIVersion, pvc.Kind = "v1", "PersistentVolumeClaim"
	var objs []*unstructured.Unstructured
	for _, o := range []runtime.Object{dep, pvc} {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
	if r := audit.Check("live", objs, audit.Live); len(r.Findings) != 0 {
		t.Fatalf("the Worker the test runs fails the live audit: %+v", r.Findings)
	}
}

// noToken: no token, raw or base64, in any log read, in an event of either
// namespace, in the Worker's other objects, or in the audit log.
func noToken(t *testing.T, ns, stageNS string, runs []run, toks ...[]byte) {
	t.Helper()
	ctx := context.Background()
	cs := cp.Clientset()
	var hay []string
	for _, r := range runs {
		hay = append(hay, r.log, r.initLog)
	}
	add := func(v any, err error) {
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		hay = append(hay, string(b))
	}
	for _, n := range []string{ns, stageNS} {
		add(cs.CoreV1().Events(n).List(ctx, metav1.ListOptions{}))
	}
	add(cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{}))
	add(cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{}))
	add(cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}))
	add(cs.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{}))
	auditLog, err := os.ReadFile(cp.AuditLogPath)
	if err != nil {
		t.Fatal(err)
	}
	hay = append(hay, string(auditLog))
	for _, tok := range toks {
		for _, needle := range []string{string(tok), base64.StdEncoding.EncodeToString(tok)} {
			for i, h := range hay {
				if strings.Contains(h, needle) {
					t.Fatalf("a token appears in haystack %d (logs, events, objects, audit log)", i)
				}
			}
		}
	}
}
