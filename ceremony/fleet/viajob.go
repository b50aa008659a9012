package fleet

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/fleetfile"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/plan"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// ViaJob runs the waves as the Indexed Jobs of Job on a management
// cluster (docs/fleet.md §9.4).
type ViaJob struct {
	// Client reaches the management cluster as its driver (the Role
	// JobRBAC prints).
	Client kubernetes.Interface
	// Job is the template of every wave's JobRequest: Namespace, Image,
	// ReceiptsClaim, BackoffLimitPerIndex and FleetPath; Plan, PlanDir,
	// Wave and Name are set per wave (Name: the default).
	Job JobRequest
	// Poll is the interval of the Job's status reads (default 1s).
	Poll time.Duration
}

// ApplyViaJob is Apply with every wave run by the Kubernetes Job
// controller: the same gate, then the wave's Job (created, or waited on
// when a Job of this plan's wave is still running — a killed driver's),
// its status waited on, then every target read back from its own cluster
// as Apply does — a Job's success alone proves nothing — and the soak. A
// wave whose targets all read back at the plan and are live as their
// release sets them (healthy) creates no Job.
func ApplyViaJob(ctx context.Context, o *Options, f *fleetfile.Fleet, req ApplyRequest, vj ViaJob) (*ApplyReport, error) {
	if vj.Client == nil {
		return nil, fail.Errorf(fail.Other, "fleet apply --via-job: no management cluster client")
	}
	return o.applyWaves(ctx, f, req, func(ctx context.Context, f *fleetfile.Fleet, req ApplyRequest, w plan.Wave) (WaveResult, []error) {
		return vj.runWave(ctx, o, f, req, w)
	})
}

// runWave runs wave w through its Job.
func (vj ViaJob) runWave(ctx context.Context, o *Options, f *fleetfile.Fleet, req ApplyRequest, w plan.Wave) (WaveResult, []error) {
	o.say("wave %s: %d target(s) as a Job in namespace %s, at most %d at once, at most %d failure(s), soak %s, gate %s", w.Name, len(w.Targets), vj.Job.Namespace, w.MaxParallel, w.MaxFailures, w.Soak(), w.Gate)
	if w.Gate == fleetfile.GateApproval {
		if wr, errs, waiting := o.gateWave(ctx, f, req, w); waiting {
			return wr, errs
		}
	}
	wr := WaveResult{Name: w.Name, Gate: w.Gate, Targets: make([]TargetResult, len(w.Targets))}
	done := true
	for i, pt := range w.Targets {
		wr.Targets[i] = TargetResult{Name: pt.Name, Namespace: pt.Namespace, Generation: pt.Generation, Version: pt.Version, Transition: pt.Transition, State: StateAlreadyCommitted}
		// At the plan by its Head and live as the release sets them: a Head
		// alone is a claim (applyTarget asks the same in each pod).
		done = done && o.healthy(ctx, f, pt) == nil
	}
	if done {
		o.say("wave %s: every target already at the plan: no Job", w.Name)
		return o.closeWave(ctx, f, w, wr)
	}
	job, err := vj.start(ctx, o, f, req, w)
	if err == nil {
		job, err = vj.wait(ctx, o, job)
	}
	if err != nil {
		for i := range wr.Targets {
			wr.Targets[i].State, wr.Targets[i].Error, wr.Targets[i].Exit, wr.Targets[i].err = StateFailed, err.Error(), exitOf(err), err
		}
		return o.closeWave(ctx, f, w, wr)
	}
	vj.judge(ctx, o, job, w, &wr)
	o.untouched(ctx, f, w, &wr)
	return o.closeWave(ctx, f, w, wr)
}

// untouched checks each target the Job's status leaves "not started": its
// Head must still be the one its record was preflighted against (or at
// the plan, committed by an earlier run). The Job controller deletes a
// failed Job's running pods, so a pod that began applying may be gone
// before the driver lists pods; its Head is what says (headUnmoved: a
// Head applying this record is unavailable, one moved by another record a
// conflict, an unreadable one its read's class).
func (o *Options) untouched(ctx context.Context, f *fleetfile.Fleet, w plan.Wave, wr *WaveResult) {
	for i, pt := range w.Targets {
		r := &wr.Targets[i]
		if r.State != StateNotStarted {
			continue
		}
		err := o.headUnmoved(ctx, f, pt)
		if err != nil {
			r.State, r.Error, r.Exit, r.err = StateFailed, err.Error(), exitOf(err), err
		}
	}
}

func (o *Options) headUnmoved(ctx context.Context, f *fleetfile.Fleet, pt plan.Target) error {
	head, err := o.headAt(ctx, f, pt)
	if err != nil {
		return fmt.Errorf("target %s: not run by the Job, and its Head cannot be read to tell whether a pod began it: %w", pt.Name, err)
	}
	tok := plan.AbsentToken
	if head != nil {
		tok = head.Expected().String()
	}
	switch {
	case tok == pt.ExpectedHead || atPlan(head, pt): // untouched, or committed by an earlier run
		return nil
	case head != nil && head.Phase == deploy.PhaseApplying && head.Transition.PreflightDigest == pt.PreflightDigest:
		return fail.Errorf(fail.Unavailable, "target %s: its Head is applying this plan's record (generation %d): the Job's pod for it began it before the Job ended; run the plan again to resume it", pt.Name, head.Generation)
	}
	return fail.Errorf(fail.Conflict, "target %s: its Head moved since the plan by another record (now %s, preflighted against %s): preflight the fleet again", pt.Name, describe(head), pt.ExpectedHead)
}

// start creates wave w's ConfigMap and Job, or finds its Job of this plan
// still running. A finished Job of the same name (an earlier run) is
// deleted first: a Job's template never changes.
func (vj ViaJob) start(ctx context.Context, o *Options, f *fleetfile.Fleet, req ApplyRequest, w plan.Wave) (*batchv1.Job, error) {
	jr := vj.Job
	jr.Plan, jr.PlanDir, jr.Wave, jr.Name = req.Plan, req.PlanDir, w.Name, ""
	objs, err := Job(f, jr)
	if err != nil {
		return nil, err
	}
	ns, name := objs.Job.Namespace, objs.Job.Name
	jobs := vj.Client.BatchV1().Jobs(ns)
	old, err := jobs.Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil && old.Annotations[AnnotationPlan] == req.Plan.SelfDigest && finished(old) == "":
		if err := vj.adoptable(ctx, old, objs); err != nil {
			return nil, err
		}
		o.say("wave %s: Job %s/%s of this plan is running: waiting on it", w.Name, ns, name)
		return old, nil
	case err == nil && finished(old) == "":
		// Another run's, still running: its pods may be mid-apply on
		// targets of their own. Deleting it would kill them; whoever runs
		// it decides.
		return nil, fail.Errorf(fail.Conflict, "wave %s: Job %s/%s is running and is not this plan's (its plan annotation is %q, this plan is %s): wait for it to finish, or delete it (kubectl delete job -n %s %s), then run again",
			w.Name, ns, name, old.Annotations[AnnotationPlan], req.Plan.SelfDigest, ns, name)
	case err == nil:
		o.say("wave %s: deleting the finished Job %s/%s of an earlier run", w.Name, ns, name)
		if err := vj.deleteJob(ctx, old); err != nil {
			return nil, err
		}
	case !apierrors.IsNotFound(err):
		return nil, mgmtErr("read Job "+name, err)
	}
	if _, err := vj.Client.CoreV1().Secrets(ns).Get(ctx, objs.SecretName, metav1.GetOptions{}); err != nil {
		return nil, mgmtErr(fmt.Sprintf("the Secret %s of the wave's kubeconfigs (one key per target: %s; see docs/fleet.md §9)", objs.SecretName, strings.Join(objs.Targets, ", ")), err)
	}
	cms := vj.Client.CoreV1().ConfigMaps(ns)
	if err := cms.Delete(ctx, objs.ConfigMap.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return nil, mgmtErr("replace ConfigMap "+objs.ConfigMap.Name, err)
	}
	if _, err := cms.Create(ctx, objs.ConfigMap, metav1.CreateOptions{FieldManager: JobFieldManager}); err != nil {
		return nil, mgmtErr("create ConfigMap "+objs.ConfigMap.Name, err)
	}
	job, err := jobs.Create(ctx, objs.Job, metav1.CreateOptions{FieldManager: JobFieldManager})
	if err != nil {
		return nil, mgmtErr("create Job "+name, err)
	}
	o.say("wave %s: created Job %s/%s: %d index(es), parallelism %d", w.Name, ns, name, *job.Spec.Completions, *job.Spec.Parallelism)
	return job, nil
}

// adoptable checks that a running Job annotated with this plan is the Job
// this command would create (a killed driver's): never changed since it
// was created (generation 1), the same annotations, the very spec the API
// server makes of objs.Job (specDiff), and its ConfigMap's files exactly
// these. An annotation anyone with the driver's Role can write is not
// evidence: a Job that differs is not waited on.
func (vj ViaJob) adoptable(ctx context.Context, old *batchv1.Job, objs *JobObjects) error {
	what := ""
	if old.Generation != 1 {
		what = fmt.Sprintf("its spec was changed after it was created (generation %d; the driver never changes a Job's spec)", old.Generation)
	}
	for _, k := range []string{AnnotationPlan, AnnotationWave, AnnotationWaveD} {
		if old.Annotations[k] != objs.Job.Annotations[k] && what == "" {
			what = "its annotation " + k
		}
	}
	if what == "" {
		d, err := vj.specDiff(ctx, objs.Job, old)
		if err != nil {
			return err
		}
		if d != "" {
			what = "its " + d
		}
	}
	if what == "" {
		cm, err := vj.Client.CoreV1().ConfigMaps(old.Namespace).Get(ctx, objs.ConfigMap.Name, metav1.GetOptions{})
		switch {
		case err != nil && !apierrors.IsNotFound(err):
			return mgmtErr("read ConfigMap "+objs.ConfigMap.Name, err)
		case err != nil || !equality.Semantic.DeepEqual(cm.Data, objs.ConfigMap.Data) || !equality.Semantic.DeepEqual(cm.BinaryData, objs.ConfigMap.BinaryData):
			what = "the files of its ConfigMap " + objs.ConfigMap.Name
		}
	}
	if what == "" {
		return nil
	}
	return fail.Errorf(fail.Conflict, "Job %s/%s is running and annotated with this plan, but %s differs from the Job this command would create: it is not waited on; find out who made it, delete it (kubectl delete job -n %s %s), then run fleet apply again",
		old.Namespace, old.Name, what, old.Namespace, old.Name)
}

// JobFieldManager is the field manager of what ApplyViaJob creates.
const JobFieldManager = "kubectl-ql3"

// deleteJob deletes job (its pods with it, in the background) and waits
// until it is gone.
func (vj ViaJob) deleteJob(ctx context.Context, job *batchv1.Job) error {
	jobs := vj.Client.BatchV1().Jobs(job.Namespace)
	bg := metav1.DeletePropagationBackground
	err := jobs.Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &job.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return mgmtErr("delete Job "+job.Name, err)
	}
	err = wait.PollUntilContextCancel(ctx, vj.poll(), true, func(ctx context.Context) (bool, error) {
		j, err := jobs.Get(ctx, job.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || err == nil && j.UID != job.UID, nil
	})
	if err != nil {
		return mgmtErr("wait for Job "+job.Name+" to go", err)
	}
	return nil
}

func (vj ViaJob) poll() time.Duration {
	if vj.Poll <= 0 {
		return time.Second
	}
	return vj.Poll
}

// wait polls job until it is finished (Complete or Failed).
func (vj ViaJob) wait(ctx context.Context, o *Options, job *batchv1.Job) (*batchv1.Job, error) {
	last := ""
	err := wait.PollUntilContextCancel(ctx, vj.poll(), true, func(ctx context.Context) (bool, error) {
		j, err := vj.Client.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return false, fail.Errorf(fail.Conflict, "Job %s/%s was deleted while this driver waited on it", job.Namespace, job.Name)
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
			return false, err
		case err != nil:
			return false, nil // read again: a passing error of the management cluster
		}
		if j.UID != job.UID {
			return false, fail.Errorf(fail.Conflict, "Job %s/%s was replaced by another while this driver waited on it", job.Namespace, job.Name)
		}
		if j.Generation != job.Generation {
			return false, fail.Errorf(fail.Conflict, "the spec of Job %s/%s was changed (generation %d, then %d) while this driver waited on it: the driver never changes it; find out who did", job.Namespace, job.Name, job.Generation, j.Generation)
		}
		job = j
		now := fmt.Sprintf("%d active, %d succeeded, %d failed; completed indexes %q, failed indexes %q", j.Status.Active, j.Status.Succeeded, j.Status.Failed, j.Status.CompletedIndexes, deref(j.Status.FailedIndexes))
		if now != last {
			o.say("Job %s: %s", j.Name, now)
			last = now
		}
		return finished(j) != "", nil
	})
	if err != nil {
		return nil, mgmtErr("wait on Job "+job.Name, err)
	}
	o.say("Job %s: %s", job.Name, finished(job))
	return job, nil
}

// finished is "Complete" or "Failed (reason)" once job has finished, "" before.
func finished(job *batchv1.Job) string {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return "Complete"
		case batchv1.JobFailed:
			return "Failed (" + c.Reason + ")"
		}
	}
	return ""
}

// judge sets each target's result from the finished Job: an index that
// failed is a failure of the class of its last pod's exit code; an index
// neither completed nor failed whose pod the Job had made was stopped with
// the Job (its pod killed, perhaps mid-apply: its Head may be left
// applying) — unavailable, as a rerun resumes it; one without any pod
// never ran (not started); a completed one is committed — until closeWave
// reads it back from its cluster.
func (vj ViaJob) judge(ctx context.Context, o *Options, job *batchv1.Job, w plan.Wave, wr *WaveResult) {
	completed, failedIdx := indexSet(job.Status.CompletedIndexes), indexSet(deref(job.Status.FailedIndexes))
	exits, ran := vj.lastExits(ctx, job)
	for i := range w.Targets {
		r := &wr.Targets[i]
		switch {
		case failedIdx[i]:
			class := classOfExit(exits[i])
			err := fail.Errorf(class, "target %s: index %d failed in Job %s/%s (its last pod exited %d; kubectl logs -n %s -l batch.kubernetes.io/job-completion-index=%d,job-name=%s)", r.Name, i, job.Namespace, job.Name, exits[i], job.Namespace, i, job.Name)
			r.State, r.Error, r.Exit, r.err = StateFailed, err.Error(), exitOf(err), err
		case completed[i]:
			r.State = StateCommitted
		case ran[i]:
			err := fail.Errorf(fail.Unavailable, "target %s: index %d was stopped when Job %s/%s finished (%s), after its pod was made: it may have begun applying (its Head left applying); run the plan again to resume it", r.Name, i, job.Namespace, job.Name, finished(job))
			r.State, r.Error, r.Exit, r.err = StateFailed, err.Error(), exitOf(err), err
		default:
			r.State = StateNotStarted
		}
	}
}

// lastExits is, per completion index, the exit code of the apply
// container of its last terminated pod (-1 when none is known), and the
// indexes the Job made a pod for.
func (vj ViaJob) lastExits(ctx context.Context, job *batchv1.Job) (map[int]int32, map[int]bool) {
	out, ran := map[int]int32{}, map[int]bool{}
	pods, err := vj.Client.CoreV1().Pods(job.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/controller-uid=" + string(job.UID)})
	if err != nil {
		return out, ran
	}
	latest := map[int]time.Time{}
	for _, p := range pods.Items {
		if !metav1.IsControlledBy(&p, job) {
			continue // a label anyone can write: only the Job's own pods count
		}
		i, err := strconv.Atoi(p.Annotations[batchv1.JobCompletionIndexAnnotation])
		if err != nil {
			continue
		}
		ran[i] = true
		for _, c := range p.Status.ContainerStatuses {
			if tm := c.State.Terminated; c.Name == JobContainer && tm != nil && !tm.FinishedAt.Time.Before(latest[i]) {
				out[i], latest[i] = tm.ExitCode, tm.FinishedAt.Time
			}
		}
	}
	return out, ran
}

// classOfExit is the class of a pod's exit code: the ceremony's classes,
// and any other failure (a crash, an unknown pod) as Other.
func classOfExit(code int32) fail.Class {
	for _, c := range []fail.Class{fail.Invalid, fail.Conflict, fail.Unavailable, fail.Tamper} {
		if int32(c.ExitCode()) == code {
			return c
		}
	}
	return fail.Other
}

// indexSet reads a Job's index list ("0,3-5,7").
func indexSet(s string) map[int]bool {
	out := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		for i := a; i <= b; i++ {
			out[i] = true
		}
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// mgmtErr is an error of the management cluster: unavailable (4) unless
// the API server refused (Forbidden, Invalid: 2).
func mgmtErr(what string, err error) error {
	class := fail.Unavailable
	if c := fail.ClassOf(err); c != fail.Other {
		class = c
	} else if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsNotFound(err) || apierrors.IsUnauthorized(err) {
		class = fail.Invalid
	}
	return fail.Errorf(class, "management cluster: %s: %w", what, err)
}
