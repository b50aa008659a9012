package nodetest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
	"k8s.io/client-go/kubernetes"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/worker"
	"github.com/qinglong/kubectl-ql3/ceremony/worker/audit"
	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/internal/testcluster/nodeimage"
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

// TestCredentialRollout publishes A → B → C with publish's wait, as a
// user holding only what worker rbac prints, and checks each on the
// running Worker the moment publish returns; publishes D through the
// plugin killed between its two writes, then reruns it (waiting by
// default); then does the same job by hand three times (replace the
// Secret, kubectl rollout restart, kubectl rollout status) and logs the
// figures: pod start, publish → running, by hand, their ratio.
func TestCredentialRollout(t *testing.T) {
	ns, stageNS := cp.Namespace(t), cp.Namespace(t)
	deployWorker(t, ns, cp.Image(nodeimage.Workload))
	prev := bootstrap(t, ns)
	o := asRBACUser(t, options(t, ns, stageNS), "rotator-node")
	o.Wait = 2 * time.Minute
	steps := []struct {
		d   *delivery.Delivery
		tok []byte
	}{
		{newDelivery(t, o, "d-a", "cred-a", nil, 1), token("A")},
		{newDelivery(t, o, "d-b", "cred-b", ptr("cred-a"), 2), token("B")},
		{newDelivery(t, o, "d-c", "cred-c", ptr("cred-b"), 3), token("C")},
	}
	var runs []run
	var fig figures
	for i, s := range steps {
		if _, err := worker.Stage(context.Background(), o, s.d, s.tok); err != nil {
			t.Fatalf("stage %s: %v", s.d.DeliveryID, err)
		}
		start := time.Now()
		res, err := worker.Publish(context.Background(), o, s.d)
		if err != nil {
			t.Fatalf("publish %s: %v", s.d.DeliveryID, err)
		}
		published := time.Since(start)
		pod := afterWait(t, ns, prev, s.d, res)
		r := waitRunning(t, ns, prev)
		took := time.Since(start)
		if r.pod.Name != pod {
			t.Fatalf("publish %s returned with pod %s Available, but pod %s runs", s.d.DeliveryID, pod, r.pod.Name)
		}
		stopped, started := check(t, r, s.tok, i)
		begun, gone, created := replaced(t, ns, prev, r.pod.Name, started)
		stop := "no earlier process"
		if i > 0 {
			stop = "old process stopped " + started.Sub(stopped).Round(time.Millisecond).String() + " before the new one started"
		}
		fig.publish, fig.podStart = append(fig.publish, took), append(fig.podStart, started.Sub(created))
		t.Logf("%s: publish --wait returned after %s with pod %s Available and the old one gone; its process reported the credential %s after publish started; pod created → process started %s; old pod deletion began %s before the new pod was created; %s; old pod gone from the API %s before the new process started",
			s.d.CredentialID, published.Round(time.Millisecond), pod, took.Round(time.Millisecond), started.Sub(created).Round(time.Millisecond),
			created.Sub(begun).Round(time.Millisecond), stop, started.Sub(gone).Round(time.Millisecond))
		runs, prev = append(runs, r), r.pod.Name
	}
	liveAudit(t, ns)

	d := newDelivery(t, o, "d-d", "cred-d", ptr("cred-c"), 4)
	r, rerun := crashAndRerun(t, buildCLI(t), ns, stageNS, prev, d, token("D"))
	_, started := check(t, r, token("D"), len(steps))
	replaced(t, ns, prev, r.pod.Name, started)
	t.Logf("cred-d: publish killed between its writes left %s running; the rerun through the plugin (waiting by default) had cred-d running after %s", prev, rerun.Round(time.Millisecond))
	runs, prev = append(runs, r), r.pod.Name

	toks := [][]byte{token("A"), token("B"), token("C"), token("D")}
	for i := range 3 {
		tok := token(fmt.Sprintf("E%d", i))
		byHand, r := rolloutByHand(t, ns, prev, tok)
		_, started := check(t, r, tok, len(steps)+1+i)
		_, _, created := replaced(t, ns, prev, r.pod.Name, started)
		fig.byHand, fig.podStart = append(fig.byHand, byHand), append(fig.podStart, started.Sub(created))
		runs, prev, toks = append(runs, r), r.pod.Name, append(toks, tok)
	}
	fig.log(t)
	noToken(t, ns, stageNS, runs, toks...)
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

// asRBACUser grants user exactly what `worker rbac` prints for o's
// namespaces and returns o acting as that user.
func asRBACUser(t *testing.T, o worker.Options, user string) worker.Options {
	t.Helper()
	objs, err := worker.RBAC(o.Namespace, o.StageNamespace, depName, worker.Subject{User: user})
	if err != nil {
		t.Fatal(err)
	}
	cp.GrantPrinted(t, objs, "-"+o.Namespace)
	cs, err := kubernetes.NewForConfig(cp.User(t, user))
	if err != nil {
		t.Fatal(err)
	}
	ns := o.Namespace
	o.Secrets, o.Deployments, o.ReplicaSets, o.Pods = cs.CoreV1().Secrets(ns), cs.AppsV1().Deployments(ns), cs.AppsV1().ReplicaSets(ns), cs.CoreV1().Pods(ns)
	o.Stages, o.Review = cs.CoreV1().Secrets(o.StageNamespace), access.NewReview(access.NewReviewer(cs))
	return o
}

// afterWait reads once, right after a publish that waited returned: the
// Worker's only pod is the one it named (res), made from the PodTemplate
// carrying d, Ready and not being deleted; the pod prev is gone from the
// API. Nothing is polled: the wait must already have seen all of it.
func afterWait(t *testing.T, ns, prev string, d *delivery.Delivery, res *worker.Result) string {
	t.Helper()
	if res.Rollout != worker.RolloutAvailable || res.Pod == "" {
		t.Fatalf("publish %s waited but reports rollout %q, pod %q", d.DeliveryID, res.Rollout, res.Pod)
	}
	return onlyPod(t, ns, prev, d, res.Pod)
}

func onlyPod(t *testing.T, ns, prev string, d *delivery.Delivery, pod string) string {
	t.Helper()
	ctx := context.Background()
	pods, err := cp.Clientset().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("right after publish %s waited: pods %s; want only %s", d.DeliveryID, testcluster.DescribePods(pods.Items), pod)
	}
	p := pods.Items[0]
	if p.Name != pod || p.DeletionTimestamp != nil || !testcluster.PodReady(p) || p.Annotations[delivery.AnnotationDeliveryID] != d.DeliveryID {
		t.Fatalf("right after publish %s waited: pod %s (%s); want %s Ready, carrying the delivery", d.DeliveryID, p.Name, testcluster.DescribePods(pods.Items), pod)
	}
	if _, err := cp.Clientset().CoreV1().Pods(ns).Get(ctx, prev, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("right after publish %s waited, the old pod %s is still in the API (%v)", d.DeliveryID, prev, err)
	}
	return p.Name
}

// figures are the durations one run measured.
type figures struct{ publish, byHand, podStart []time.Duration }

// spread is "median (min–max) over n".
func spread(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	r := func(d time.Duration) string { return d.Round(10 * time.Millisecond).String() }
	return fmt.Sprintf("median %s (%s–%s, n=%d)", r(s[len(s)/2]), r(s[0]), r(s[len(s)-1]), len(s))
}

func (f figures) log(t *testing.T) {
	t.Helper()
	var ratios []float64
	for _, p := range f.publish {
		for _, h := range f.byHand {
			ratios = append(ratios, float64(p)/float64(h))
		}
	}
	slices.Sort(ratios)
	t.Logf("figures: pod created → process started %s; publish --wait start → new credential running %s; by hand (replace, rollout restart, rollout status) → running %s; ratio publish/by hand over every pair: median %.2f (%.2f–%.2f, n=%d)",
		spread(f.podStart), spread(f.publish), spread(f.byHand), ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1], len(ratios))
}

// A Worker whose image cannot run: the first publish through the plugin
// writes both objects, waits, and exits 4 after --timeout, saying what
// was verified and the new pod's reason (ErrImageNeverPull); the rerun
// with --wait=false is a replay.
func TestPublishWaitTimeout(t *testing.T) {
	ns, stageNS := cp.Namespace(t), cp.Namespace(t)
	deployWorker(t, ns, "ql3.local/workload:absent")
	o := options(t, ns, stageNS)
	d := newDelivery(t, o, "d-a", "cred-a", nil, 1)
	c := buildCLI(t)
	f := c.deliveryFile(t, d)
	common := []string{"--delivery", f, "--stage-namespace", stageNS}
	if out, code := c.run(t, token("A"), nil, append([]string{"worker", "stage", "--token-file", "-"}, common...)...); code != 0 {
		t.Fatalf("worker stage: exit %d\n%s", code, out)
	}
	publish := append([]string{"worker", "publish", "--token-digest-key-file", c.dir + "/key"}, common...)
	out, code := c.run(t, nil, nil, append(publish, "--timeout", "30s")...)
	for _, want := range []string{`carries delivery "d-a"`, "both written and read back", "after waiting 30s the new credential's pod is not Available",
		"ErrImageNeverPull", "waiting alone will not clear", "rerun the same publish to wait again"} {
		if code != 4 || !strings.Contains(out, want) {
			t.Fatalf("publish --wait of a Worker whose image cannot run: exit %d, want 4 saying %q\n%s", code, want, out)
		}
	}
	t.Logf("the timed-out publish said:\n%s", out)
	pods, err := cp.Clientset().CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.Phase != corev1.PodPending {
		t.Fatalf("after the timeout: %v %s; want one Pending pod", err, testcluster.DescribePods(pods.Items))
	}
	if out, code := c.run(t, nil, nil, append(publish, "--wait=false")...); code != 0 || !strings.Contains(out, "deployment/ql3-worker: unchanged\nrollout: not waited for (--wait=false)") {
		t.Fatalf("replay without a wait: exit %d\n%s", code, out)
	}
}
