package deploy

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/qinglong/kubectl-ql3/internal/podstatus"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// When a workload does not become Current, converge says why from its
// pods (docs/ceremony.md §6.5): for a Deployment the pods of its newest
// ReplicaSet (the highest deployment.kubernetes.io/revision among those it
// controls), for a StatefulSet or DaemonSet the pods it controls. Each
// pod not Ready gives its cause: a PodScheduled=False condition
// (Unschedulable), a container (init containers first) waiting with a
// reason other than the transient ContainerCreating and PodInitializing
// (ErrImageNeverPull, ImagePullBackOff, CrashLoopBackOff with the last
// termination's exit code, CreateContainerConfigError, …), a container
// that terminated with a nonzero exit code; equal causes of several pods
// are told once with their count. It takes one LIST of ReplicaSets and one
// of pods per workload, with the workload's selector, at most
// rolloutExplainMax workloads, bounded by rolloutExplainTimeout:
// `kubectl ql3 rbac` grants `list` on pods (and on replicasets for a
// Deployment) in the namespaces of the release's workloads for it. A
// LIST that is refused or fails is said in the message; it never fails
// the ceremony.
const (
	rolloutExplainMax     = 5
	rolloutExplainTimeout = 10 * time.Second
	revisionAnnotation    = "deployment.kubernetes.io/revision"
)

// podKinds are the apps kinds whose pods converge explains.
var podKinds = map[string]bool{"Deployment": true, "StatefulSet": true, "DaemonSet": true}

// rolloutCause is what the pods of one workload show.
type rolloutCause struct {
	text  string // "2 pods of ReplicaSet web-5d8f: container web waiting: ErrImageNeverPull: …"
	stuck bool   // a cause that waiting alone does not clear
}

// explainRollouts explains the workloads among ids (not Current), at most
// rolloutExplainMax of them, by their pods; the result maps each explained
// workload to its cause.
func (o *Options) explainRollouts(ctx context.Context, ids []inventory.Identity) map[inventory.Identity]rolloutCause {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rolloutExplainTimeout)
	defer cancel()
	out := map[inventory.Identity]rolloutCause{}
	for _, id := range ids {
		if len(out) == rolloutExplainMax {
			break
		}
		if id.APIVersion == "apps/v1" && podKinds[id.Kind] {
			out[id] = o.explainRollout(ctx, id)
		}
	}
	return out
}

// explainRollout reads workload id and the pods of its current revision.
func (o *Options) explainRollout(ctx context.Context, id inventory.Identity) rolloutCause {
	u, err := o.Cluster.Get(ctx, id)
	if err != nil {
		return rolloutCause{text: fmt.Sprintf("pods not read: %v", err)}
	}
	owner, selector, what := u.GetUID(), workloadSelector(u), id.Kind+" "+id.Name
	if id.Kind == "Deployment" {
		rs, err := o.newestReplicaSet(ctx, u, selector)
		if err != nil {
			return rolloutCause{text: readFailed("replicasets", id.Namespace, err)}
		}
		if rs == nil {
			return rolloutCause{text: "no ReplicaSet of it yet"}
		}
		owner, selector, what = rs.UID, metav1.FormatLabelSelector(rs.Spec.Selector), "ReplicaSet "+rs.Name
		if c := replicaFailure(rs); c != "" {
			return rolloutCause{text: what + ": " + c, stuck: true}
		}
	}
	list, err := o.Cluster.ListPage(ctx, corev1.SchemeGroupVersion.WithKind("Pod"), id.Namespace, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return rolloutCause{text: readFailed("pods", id.Namespace, err)}
	}
	return podCauses(list.Items, owner, what)
}

// readFailed says that a LIST of resource in ns failed and what to grant.
func readFailed(resource, ns string, err error) string {
	if apierrors.IsForbidden(err) {
		return fmt.Sprintf("its pods could not be read: list %s in namespace %s is forbidden (`kubectl ql3 rbac` grants it)", resource, ns)
	}
	return fmt.Sprintf("its pods could not be read: list %s in namespace %s: %v", resource, ns, err)
}

// workloadSelector is u's spec.selector as a label selector string.
func workloadSelector(u *unstructured.Unstructured) string {
	m, _, _ := unstructured.NestedMap(u.Object, "spec", "selector")
	var sel metav1.LabelSelector
	if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &sel) != nil {
		return ""
	}
	return metav1.FormatLabelSelector(&sel)
}

// newestReplicaSet is the ReplicaSet deployment d controls with the
// highest revision, nil when it controls none.
func (o *Options) newestReplicaSet(ctx context.Context, d *unstructured.Unstructured, selector string) (*appsv1.ReplicaSet, error) {
	list, err := o.Cluster.ListPage(ctx, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"), d.GetNamespace(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	var newest *appsv1.ReplicaSet
	best := int64(-1)
	for i := range list.Items {
		var rs appsv1.ReplicaSet
		if runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, &rs) != nil || !controlledBy(rs.OwnerReferences, d.GetUID()) {
			continue
		}
		if rev, _ := strconv.ParseInt(rs.Annotations[revisionAnnotation], 10, 64); rev > best {
			best, newest = rev, &rs
		}
	}
	return newest, nil
}

func controlledBy(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller && r.UID == uid {
			return true
		}
	}
	return false
}

// replicaFailure is a ReplicaSet's ReplicaFailure condition (pods it could
// not create: quota, admission), "" when it has none.
func replicaFailure(rs *appsv1.ReplicaSet) string {
	for _, c := range rs.Status.Conditions {
		if c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue {
			return fmt.Sprintf("cannot create pods: %s: %s", c.Reason, c.Message)
		}
	}
	return ""
}

// podCauses sums up the causes of the pods among items that owner
// controls and that are not Ready; what names the owner.
func podCauses(items []unstructured.Unstructured, owner types.UID, what string) rolloutCause {
	count := map[string]int{}
	var order []string
	stuck, pods := false, 0
	for i := range items {
		var p corev1.Pod
		if runtime.DefaultUnstructuredConverter.FromUnstructured(items[i].Object, &p) != nil || !controlledBy(p.OwnerReferences, owner) || p.DeletionTimestamp != nil {
			continue
		}
		pods++
		cause, s := podstatus.Cause(&p)
		if cause == "" {
			continue
		}
		stuck = stuck || s
		if count[cause] == 0 {
			order = append(order, cause)
		}
		count[cause]++
	}
	if pods == 0 {
		return rolloutCause{text: what + " has no pods"}
	}
	if len(order) == 0 {
		return rolloutCause{text: fmt.Sprintf("%s: %d pod(s), none shows a cause yet", what, pods)}
	}
	slices.SortStableFunc(order, func(a, b string) int { return cmp.Compare(count[b], count[a]) })
	parts := make([]string, len(order))
	for i, c := range order {
		parts[i] = fmt.Sprintf("%d of %d pod(s) of %s: %s", count[c], pods, what, c)
	}
	return rolloutCause{text: strings.Join(parts, "; "), stuck: stuck}
}
