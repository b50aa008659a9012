package worker

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/podstatus"
)

// Lister is the List of one namespace's objects of a kind; client-go's
// cs.AppsV1().ReplicaSets(ns) and cs.CoreV1().Pods(ns) satisfy it.
type Lister[L any] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
}

// Values of Result.Rollout.
const (
	// RolloutNotWaited: the PodTemplate carries the delivery (the
	// Deployment controller rolls the Worker after it); publish did not
	// wait to see the new credential's pod.
	RolloutNotWaited = "not-waited"
	// RolloutAvailable: publish waited until the ReplicaSet of the
	// PodTemplate carrying the delivery had its pod Available and no pod
	// of an older ReplicaSet of the Deployment was left.
	RolloutAvailable = "available"
)

// RevisionAnnotation is the Deployment controller's revision, on the
// Deployment and on each of its ReplicaSets.
const RevisionAnnotation = "deployment.kubernetes.io/revision"

// pollInterval is the pause between two rounds of reads while waiting.
const pollInterval = 250 * time.Millisecond

// waitNeeds is what waiting reads in the Worker's namespace: lists (RBAC
// cannot limit a list by name), never a watch.
func waitNeeds(ns string) []access.Access {
	return []access.Access{
		{Verb: "list", Group: "apps", Resource: "replicasets", Namespace: ns},
		{Verb: "list", Resource: "pods", Namespace: ns},
	}
}

// rollout is one round of reads judged: settled when pending is empty.
type rollout struct {
	replicaSet, pod string
	pending         []string
	stuck           string // a new pod's cause that waiting alone does not clear (podstatus.Cause), "" if none
}

// waitRollout polls (GET of the Deployment, LIST of its ReplicaSets and
// pods by its selector; never a watch) until the rollout of want has
// settled, at most o.Wait. A read that fails unanswered is retried
// until then, as is one the wait's own deadline cut; an invalid, conflict
// or tamper one (forbidden, the Deployment gone or superseded) ends the
// wait at once. Timing out is unavailable (exit 4): the message
// says that both objects hold the delivery and what was not yet so.
func (o *Options) waitRollout(ctx context.Context, d *delivery.Delivery, dn string, want delivery.Stamp, res *Result) error {
	start := time.Now()
	var last, stuck string
	var lastErr error
	var done *rollout
	err := wait.PollUntilContextTimeout(ctx, pollInterval, o.Wait, true, func(ctx context.Context) (bool, error) {
		r, err := o.readRollout(ctx, d, dn, want)
		switch {
		case fail.Is(err, fail.Invalid), fail.Is(err, fail.Conflict), fail.Is(err, fail.Tamper):
			return false, err // waiting cannot grant a permission or undo a successor
		case err != nil:
			// No answer, or the wait's own deadline cutting a read (the
			// client's rate limiter then fails before it): read again.
			lastErr = err
			return false, nil
		}
		lastErr = nil
		if len(r.pending) == 0 {
			done = r
			return true, nil
		}
		stuck = r.stuck
		if now := strings.Join(r.pending, "; "); now != last {
			o.Say.Printf("waiting for the new credential's pod: %s", now)
			last = now
		}
		return false, nil
	})
	if done != nil {
		res.Rollout, res.ReplicaSet, res.Pod = RolloutAvailable, done.replicaSet, done.pod
		o.Say.Printf("%s: pod %s of ReplicaSet %s (PodTemplate of credential %q) is Available, no pod of an older ReplicaSet is left (waited %s)",
			o.deploymentWhat(dn), done.pod, done.replicaSet, d.CredentialID, time.Since(start).Round(time.Millisecond))
		return nil
	}
	if err != nil && !wait.Interrupted(err) {
		return err
	}
	why := last // what the last answered reads showed
	switch {
	case why == "" && lastErr != nil:
		why = "the reads failed: " + lastErr.Error()
	case why == "":
		why = "no read was answered"
	}
	sel := RoleLabel + "=" + RoleValue
	next := "rerun the same publish to wait again (it writes nothing more)"
	if stuck != "" {
		next = fmt.Sprintf("waiting alone will not clear %q: fix it (the image, the pod's spec), then rerun the same publish to wait again (it writes nothing more)", stuck)
	}
	return fail.Errorf(fail.Unavailable, "%s carries delivery %q and %s holds its token (both written and read back), but after waiting %s the new credential's pod is not Available: %s; %s, and look at the pods: kubectl -n %s get pods -l %s",
		o.deploymentWhat(dn), d.DeliveryID, o.secretWhat(), o.Wait, why, next, o.Namespace, sel)
}

// readRollout reads the Deployment, then its ReplicaSets and pods by its
// selector, and judges them.
func (o *Options) readRollout(ctx context.Context, d *delivery.Delivery, dn string, want delivery.Stamp) (*rollout, error) {
	what := o.deploymentWhat(dn)
	dep, present, err := cas.Read(ctx, o.Deployments, dn, what)
	if err != nil {
		return nil, err
	}
	if !present {
		return nil, fail.Errorf(fail.Conflict, "%s was deleted while waiting for delivery %q to roll out", what, d.DeliveryID)
	}
	if !delivery.Carries(dep.Spec.Template.Annotations, want) {
		return nil, fail.Errorf(fail.Conflict, "%s no longer carries delivery %q while waiting for its rollout (it now carries delivery %q, credential %q): another publish superseded it; nothing is left to wait for",
			what, d.DeliveryID, dep.Spec.Template.Annotations[delivery.AnnotationDeliveryID], dep.Spec.Template.Annotations[delivery.AnnotationCredentialID])
	}
	if dep.Status.ObservedGeneration < dep.Generation {
		return &rollout{pending: []string{fmt.Sprintf("the Deployment controller has not yet observed generation %d (observed %d)", dep.Generation, dep.Status.ObservedGeneration)}}, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "%s: spec.selector: %v", what, err)
	}
	opts := metav1.ListOptions{LabelSelector: sel.String()}
	rss, err := o.ReplicaSets.List(ctx, opts)
	if err != nil {
		return nil, cas.Classify(cas.OpRead, "list the ReplicaSets of "+what, err)
	}
	pods, err := o.Pods.List(ctx, opts)
	if err != nil {
		return nil, cas.Classify(cas.OpRead, "list the pods of "+what, err)
	}
	return judgeRollout(dep, rss.Items, pods.Items, want), nil
}

// judgeRollout judges one round of reads of a Deployment that carries
// want and whose controller has observed its generation. The new
// ReplicaSet is the one the Deployment controls whose revision is the
// Deployment's and whose PodTemplate carries want; the rollout is settled
// when that ReplicaSet wants and has the Deployment's replicas Available
// (its controller's count, its generation observed), each of its pods not
// being deleted is Ready, the Deployment's status counts them updated and
// available, and no pod of any other ReplicaSet it controls exists at all,
// terminating or not. Otherwise pending says what is not yet so, with
// each pod's phase and its containers' waiting reasons.
func judgeRollout(dep *appsv1.Deployment, rss []appsv1.ReplicaSet, pods []corev1.Pod, want delivery.Stamp) *rollout {
	r := &rollout{}
	replicas := int32(1)
	if dep.Spec.Replicas != nil {
		replicas = *dep.Spec.Replicas
	}
	owned := map[types.UID]string{}
	var newRS *appsv1.ReplicaSet
	for i := range rss {
		rs := &rss[i]
		if c := metav1.GetControllerOf(rs); c == nil || c.UID != dep.UID {
			continue
		}
		owned[rs.UID] = rs.Name
		if rs.Annotations[RevisionAnnotation] == dep.Annotations[RevisionAnnotation] && delivery.Carries(rs.Spec.Template.Annotations, want) {
			newRS = rs
		}
	}
	if newRS == nil {
		r.pending = append(r.pending, "the Deployment controller has not yet made the ReplicaSet of this PodTemplate (it first waits for the old pod to go)")
	}
	ready := int32(0)
	for i := range pods {
		p := &pods[i]
		c := metav1.GetControllerOf(p)
		if c == nil || owned[c.UID] == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue // a finished pod (an evicted one stays, Failed) runs nothing: controllers do not count it either
		}
		switch {
		case newRS == nil || c.UID != newRS.UID:
			r.pending = append(r.pending, fmt.Sprintf("pod %s of the older ReplicaSet %s still exists (%s)", p.Name, owned[c.UID], podstatus.State(p)))
		case p.DeletionTimestamp == nil && podstatus.Ready(p):
			ready++
			r.pod = p.Name
		case p.DeletionTimestamp == nil:
			r.pending = append(r.pending, fmt.Sprintf("pod %s: %s", p.Name, podstatus.State(p)))
			if cause, stuck := podstatus.Cause(p); stuck && r.stuck == "" {
				r.stuck = cause
			}
		}
	}
	if newRS == nil {
		return r
	}
	r.replicaSet = newRS.Name
	st := newRS.Status
	if newRS.Spec.Replicas == nil || *newRS.Spec.Replicas != replicas || st.ObservedGeneration < newRS.Generation || st.AvailableReplicas < replicas || ready < replicas {
		r.pending = append(r.pending, fmt.Sprintf("ReplicaSet %s: %d of %d pods Ready, %d Available by its controller", newRS.Name, ready, replicas, st.AvailableReplicas))
	}
	if ds := dep.Status; ds.UpdatedReplicas != replicas || ds.AvailableReplicas != replicas || ds.Replicas != replicas {
		r.pending = append(r.pending, fmt.Sprintf("the Deployment's status counts %d updated, %d available, %d in all of %d", ds.UpdatedReplicas, ds.AvailableReplicas, ds.Replicas, replicas))
	}
	return r
}
