package worker

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
)

// rolloutFixture is a Deployment carrying want at revision 2, its old
// ReplicaSet (revision 1) and its new one (revision 2, carrying want).
func rolloutFixture() (*appsv1.Deployment, []appsv1.ReplicaSet, delivery.Stamp) {
	want := delivery.Stamp{}
	for _, k := range delivery.Annotations {
		want[k] = "value-of-" + k
	}
	one := int32(1)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: depName, UID: "dep-uid", Generation: 2, Annotations: map[string]string{RevisionAnnotation: "2"}},
		Spec:       appsv1.DeploymentSpec{Replicas: &one, Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: want}}},
		Status:     appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1},
	}
	ctl := true
	rs := func(name, rev string, replicas int32, tmpl map[string]string) appsv1.ReplicaSet {
		return appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), Generation: 1, Annotations: map[string]string{RevisionAnnotation: rev},
				OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: depName, UID: dep.UID, Controller: &ctl}}},
			Spec:   appsv1.ReplicaSetSpec{Replicas: &replicas, Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: tmpl}}},
			Status: appsv1.ReplicaSetStatus{ObservedGeneration: 1, Replicas: replicas, AvailableReplicas: replicas},
		}
	}
	return dep, []appsv1.ReplicaSet{rs("old", "1", 0, nil), rs("new", "2", 1, want)}, want
}

func fixturePod(name, rs string, ready bool, mut func(*corev1.Pod)) corev1.Pod {
	ctl := true
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: rs, UID: types.UID(rs), Controller: &ctl}}},
		Spec:       corev1.PodSpec{NodeName: "node"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}},
	}
	if mut != nil {
		mut(&p)
	}
	return p
}

// judgeRollout settles only when the new ReplicaSet's pod is Ready and
// Available and no pod of an older ReplicaSet exists; otherwise it says
// what is missing, with the pods' waiting reasons.
func TestJudgeRollout(t *testing.T) {
	now := metav1.NewTime(time.Now())
	neverPull := func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodPending
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "private-copy", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: "image is not present"}}}}
	}
	cases := []struct {
		name string
		mut  func(*appsv1.Deployment, []appsv1.ReplicaSet)
		pods []corev1.Pod
		want []string // substrings of the pending description; none: settled
	}{
		{name: "settled", pods: []corev1.Pod{fixturePod("p-new", "new", true, nil)}},
		{name: "a pod of another owner is not the Worker's", pods: []corev1.Pod{fixturePod("p-new", "new", true, nil), fixturePod("other", "foreign", true, nil)}},
		{name: "old pod terminating", pods: []corev1.Pod{fixturePod("p-new", "new", true, nil), fixturePod("p-old", "old", true, func(p *corev1.Pod) { p.DeletionTimestamp = &now })},
			want: []string{"pod p-old of the older ReplicaSet old still exists (Running, terminating)"}},
		{name: "new pod cannot pull", pods: []corev1.Pod{fixturePod("p-new", "new", false, neverPull)},
			want: []string{"pod p-new: Pending, init container private-copy waiting: ErrImageNeverPull (image is not present)", "ReplicaSet new: 0 of 1 pods Ready"}},
		{name: "new pod not scheduled", pods: []corev1.Pod{fixturePod("p-new", "new", false, func(p *corev1.Pod) { p.Spec.NodeName, p.Status.Phase = "", corev1.PodPending })},
			want: []string{"pod p-new: Pending, not yet scheduled"}},
		{name: "no new ReplicaSet yet", mut: func(_ *appsv1.Deployment, rss []appsv1.ReplicaSet) {
			rss[1].Annotations[RevisionAnnotation] = "1"
			rss[1].Spec.Template.Annotations = nil
		},
			pods: []corev1.Pod{fixturePod("p-old", "old", true, nil)}, want: []string{"has not yet made the ReplicaSet", "pod p-old of the older ReplicaSet old"}},
		{name: "the ReplicaSet's controller has not counted it", mut: func(_ *appsv1.Deployment, rss []appsv1.ReplicaSet) { rss[1].Status.AvailableReplicas = 0 },
			pods: []corev1.Pod{fixturePod("p-new", "new", true, nil)}, want: []string{"1 of 1 pods Ready, 0 Available"}},
		{name: "the Deployment's status lags", mut: func(d *appsv1.Deployment, _ []appsv1.ReplicaSet) { d.Status.Replicas = 2 },
			pods: []corev1.Pod{fixturePod("p-new", "new", true, nil)}, want: []string{"counts 1 updated, 1 available, 2 in all of 1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dep, rss, want := rolloutFixture()
			if c.mut != nil {
				c.mut(dep, rss)
			}
			r := judgeRollout(dep, rss, c.pods, want)
			got := strings.Join(r.pending, "; ")
			if len(c.want) == 0 {
				if got != "" || r.pod != "p-new" || r.replicaSet != "new" {
					t.Fatalf("want settled on p-new of new, got %+v", r)
				}
				return
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Fatalf("pending %q: want %q", got, w)
				}
			}
		})
	}
}

// Publish with a wait needs list on ReplicaSets and on pods in the
// Worker's namespace: the printed least privilege less either one fails
// closed (exit 2 naming it) before any write. With both, a wait on this
// cluster (no node: the pod is never scheduled) ends unavailable (exit 4)
// after the writes, naming the pod's state — and the user only listed,
// never watched.
func TestWaitLeastPrivilege(t *testing.T) {
	for _, res := range []string{"replicasets", "pods", ""} {
		name := res
		if name == "" {
			name = "all"
		}
		t.Run(name, func(t *testing.T) {
			ns, stageNS := cp.Namespace(t), cp.Namespace(t)
			deploy(t, ns)
			user := "rotator-wait-" + name
			grantWithout(t, ns, stageNS, user, res)
			o := options(t, cp.User(t, user), ns, stageNS)
			o.Wait = 8 * time.Second
			d := newDelivery(t, ns, "d-a", "cred-a", nil, 1)
			if _, err := Stage(context.Background(), o, d, token("A")); err != nil {
				t.Fatal(err)
			}
			_, err := Publish(context.Background(), o, d)
			if res != "" {
				if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "list "+res) {
					t.Fatalf("publish --wait without list on %s: %v; want invalid naming it", res, err)
				}
				cp.NoWrites(t, user, ns, "secrets")
				cp.NoWrites(t, user, ns, "deployments")
				return
			}
			if !fail.Is(err, fail.Unavailable) || !strings.Contains(err.Error(), "both written and read back") || !strings.Contains(err.Error(), "not yet scheduled") {
				t.Fatalf("publish --wait with no node: %v; want unavailable naming the unscheduled pod", err)
			}
			t.Logf("the timed-out wait: %v", err)
			if got := getDep(t, ns).Spec.Template.Annotations[delivery.AnnotationDeliveryID]; got != "d-a" {
				t.Fatalf("the Deployment carries delivery %q after the wait timed out", got)
			}
			listed := map[string]bool{}
			reads, err := cp.Reads(func(e testcluster.AuditEvent) bool { return e.User.Username == user && e.ObjectRef.Namespace == ns })
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range reads {
				if e.Verb == "watch" {
					t.Fatalf("the wait watched: %+v", e)
				}
				listed[e.Verb+" "+e.ObjectRef.Resource] = true
			}
			if !listed["list replicasets"] || !listed["list pods"] {
				t.Fatalf("audit log: the user's reads in %s: %v; want its lists of replicasets and pods", ns, listed)
			}
		})
	}
}

// grantWithout grants user the printed least privilege, less every rule
// on resource ("" keeps them all).
func grantWithout(t *testing.T, ns, stageNS, user, resource string) {
	t.Helper()
	objs, err := RBAC(ns, stageNS, depName, Subject{User: user})
	if err != nil {
		t.Fatal(err)
	}
	role := objs[0].(*rbacv1.Role)
	n := len(role.Rules)
	role.Rules = slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, resource) })
	if resource != "" && len(role.Rules) != n-1 {
		t.Fatalf("the Role in the Worker's namespace has %d rules on %s, want 1", n-len(role.Rules), resource)
	}
	cp.Grant(t, ns, role, objs[3].(*rbacv1.RoleBinding), "")
	cp.Grant(t, stageNS, objs[1].(*rbacv1.Role), objs[4].(*rbacv1.RoleBinding), "")
	cr, crb := objs[2].(*rbacv1.ClusterRole), objs[5].(*rbacv1.ClusterRoleBinding)
	cr.Name += "-" + ns
	crb.Name += "-" + ns
	crb.RoleRef.Name = cr.Name
	ctx := context.Background()
	if _, err := cp.Clientset().RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Clientset().RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
