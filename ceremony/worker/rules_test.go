package worker

import (
	"encoding/json"
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
)

func workerDeployment() *appsv1.Deployment {
	one := int32(1)
	lbl := map[string]string{RoleLabel: RoleValue}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: depName, Namespace: "ns", Labels: lbl, ResourceVersion: "7"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one, Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl, Annotations: map[string]string{"keep": "me"}},
				Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "sources", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: delivery.SecretName}, Items: []corev1.KeyToPath{{Key: delivery.SecretKey, Path: "t"}}}},
				}}}}}},
			},
		},
	}
}

func TestCheckDeployment(t *testing.T) {
	two := int32(2)
	now := metav1.Now()
	for _, c := range []struct {
		name string
		edit func(*appsv1.Deployment)
		want string
	}{
		{"valid", func(*appsv1.Deployment) {}, ""},
		{"replicas", func(d *appsv1.Deployment) { d.Spec.Replicas = &two }, "spec.replicas"},
		{"replicas unset", func(d *appsv1.Deployment) { d.Spec.Replicas = nil }, "spec.replicas"},
		{"rolling", func(d *appsv1.Deployment) { d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType }, "Recreate"},
		{"label", func(d *appsv1.Deployment) { d.Spec.Template.Labels = nil }, "label"},
		{"deleting", func(d *appsv1.Deployment) { d.DeletionTimestamp = &now }, "being deleted"},
		{"other secret", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Volumes[0].Projected.Sources[0].Secret.Name = "other"
		}, "no projected volume"},
		{"other key", func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Volumes[0].Projected.Sources[0].Secret.Items[0].Key = "tls.key"
		}, "no projected volume"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := workerDeployment()
			c.edit(d)
			err := CheckDeployment(d, "dep")
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want invalid naming %q", err, c.want)
			}
		})
	}
}

// Stamped adds the five annotations and changes nothing else.
func TestStamped(t *testing.T) {
	d := workerDeployment()
	want := delivery.Stamp{}
	for i, k := range delivery.Annotations {
		want[k] = string(rune('a' + i))
	}
	got := Stamped(d, want)
	if !delivery.Carries(got.Spec.Template.Annotations, want) || got.Spec.Template.Annotations["keep"] != "me" || got.ResourceVersion != "7" {
		t.Fatalf("stamped: %+v", got.Spec.Template.Annotations)
	}
	for _, k := range delivery.Annotations {
		delete(got.Spec.Template.Annotations, k)
	}
	a, _ := json.Marshal(d)
	b, _ := json.Marshal(got)
	if string(a) != string(b) {
		t.Fatalf("more than the five annotations changed:\n%s\n%s", a, b)
	}
	if _, ok := d.Spec.Template.Annotations[delivery.AnnotationDeliveryID]; ok {
		t.Fatal("Stamped changed its input")
	}
}

// The least privilege: nothing on the identity Secret, no patch or watch,
// no Deployment create or delete, no pods; stages in their own namespace.
func TestRBAC(t *testing.T) {
	if _, err := RBAC("ns", "ns", depName, Subject{}); !fail.Is(err, fail.Invalid) {
		t.Fatalf("stage namespace = Worker namespace: %v", err)
	}
	objs, err := RBAC("ns", "stages", depName, Subject{User: "u", Group: "g"})
	if err != nil || len(objs) != 6 {
		t.Fatalf("%d objects, %v", len(objs), err)
	}
	for _, o := range objs {
		var rules []rbacv1.PolicyRule
		switch v := o.(type) {
		case *rbacv1.Role:
			rules = v.Rules
		case *rbacv1.ClusterRole:
			rules = v.Rules
		}
		for _, r := range rules {
			for _, verb := range r.Verbs {
				if verb == "patch" || verb == "watch" || verb == "*" || verb == "deletecollection" {
					t.Fatalf("verb %s in %+v", verb, r)
				}
			}
			if slices.Contains(r.ResourceNames, delivery.IdentitySecret) || slices.ContainsFunc(r.Resources, func(res string) bool { return strings.HasPrefix(res, "pods/") }) {
				t.Fatalf("rule %+v", r)
			}
			// publish --wait polls: list on pods and ReplicaSets, nothing more.
			if (slices.Contains(r.Resources, "pods") || slices.Contains(r.Resources, "replicasets")) && (len(r.Resources) != 1 || !slices.Equal(r.Verbs, []string{"list"})) {
				t.Fatalf("pod or ReplicaSet rule %+v: want list only", r)
			}
			if slices.Contains(r.Resources, "deployments") && (slices.Contains(r.Verbs, "create") || slices.Contains(r.Verbs, "delete") || len(r.ResourceNames) != 1) {
				t.Fatalf("deployment rule %+v", r)
			}
		}
	}
	role := objs[0].(*rbacv1.Role)
	for _, r := range role.Rules {
		if slices.Contains(r.Resources, "secrets") && (slices.Contains(r.Verbs, "list") || (slices.Contains(r.Verbs, "get") && len(r.ResourceNames) == 0)) {
			t.Fatalf("the Worker namespace's Role can read unnamed Secrets: %+v", r)
		}
	}
}

// The Role in the Worker's namespace names its Deployment (another
// Worker's print must not replace it); a name too long to bind is invalid
// input naming --deployment.
func TestRBACRoleNames(t *testing.T) {
	a, _ := RBAC("ns", "stages", "worker-a", Subject{User: "u"})
	b, _ := RBAC("ns", "stages", "worker-b", Subject{User: "u"})
	if ra, rb := a[0].(*rbacv1.Role).Name, b[0].(*rbacv1.Role).Name; ra != RoleName+":worker-a" || ra == rb {
		t.Fatalf("Roles in the Worker namespace: %q and %q", ra, rb)
	}
	if ba, bb := a[3].(*rbacv1.RoleBinding), b[3].(*rbacv1.RoleBinding); ba.Name == bb.Name || ba.RoleRef.Name != a[0].(*rbacv1.Role).Name {
		t.Fatalf("RoleBindings %q and %q", ba.Name, bb.Name)
	}
	if _, err := RBAC("ns", "stages", strings.Repeat("a", 253), Subject{}); !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "--deployment") {
		t.Fatalf("a Deployment name too long for its Role: %v", err)
	}
}

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
		name  string
		mut   func(*appsv1.Deployment, []appsv1.ReplicaSet)
		pods  []corev1.Pod
		want  []string // substrings of the pending description; none: settled
		stuck string   // the cause waiting alone does not clear, if any
	}{
		{name: "settled", pods: []corev1.Pod{fixturePod("p-new", "new", true, nil)}},
		{name: "a pod of another owner is not the Worker's", pods: []corev1.Pod{fixturePod("p-new", "new", true, nil), fixturePod("other", "foreign", true, nil)}},
		{name: "old pod terminating", pods: []corev1.Pod{fixturePod("p-new", "new", true, nil), fixturePod("p-old", "old", true, func(p *corev1.Pod) { p.DeletionTimestamp = &now })},
			want: []string{"pod p-old of the older ReplicaSet old still exists (Running, terminating)"}},
		{name: "an evicted pod of the older ReplicaSet is finished, not running", pods: []corev1.Pod{fixturePod("p-new", "new", true, nil), fixturePod("p-old", "old", false, func(p *corev1.Pod) {
			p.Status.Phase, p.Status.Reason = corev1.PodFailed, "Evicted"
		})}},
		{name: "new pod cannot pull", pods: []corev1.Pod{fixturePod("p-new", "new", false, neverPull)},
			want:  []string{"pod p-new: Pending, init container private-copy waiting: ErrImageNeverPull (image is not present)", "ReplicaSet new: 0 of 1 pods Ready"},
			stuck: "container private-copy waiting: ErrImageNeverPull: image is not present"},
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
			if r.stuck != c.stuck {
				t.Fatalf("stuck %q, want %q", r.stuck, c.stuck)
			}
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
