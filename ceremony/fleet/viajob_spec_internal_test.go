package fleet

import (
	"reflect"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
)

// fieldDiff names the first differing field by its JSON path, and two
// Jobs made of one spec differ only in the labels that name each Job.
func TestFieldDiffAndOwnNames(t *testing.T) {
	job := func(uid, name string, edit func(*batchv1.Job)) *batchv1.Job {
		labels := map[string]string{"app": "x", batchv1.ControllerUidLabel: uid, "controller-uid": uid, batchv1.JobNameLabel: name, "job-name": name}
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batchv1.JobSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: uid}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}}}
		j.UID = k8stypes.UID(uid)
		if edit != nil {
			edit(j)
		}
		return j
	}
	yes := true
	for _, c := range []struct {
		name string
		b    *batchv1.Job
		want string
	}{
		{"the same spec, another Job", job("u2", "n-abcde", nil), ""},
		{"suspended", job("u2", "n-abcde", func(j *batchv1.Job) { j.Spec.Suspend = &yes }), "spec.suspend"},
		{"another image", job("u2", "n-abcde", func(j *batchv1.Job) { j.Spec.Template.Spec.Containers[0].Image = "o" }), "spec.template.spec.containers"},
		{"a label that names another Job", job("u2", "n-abcde", func(j *batchv1.Job) { j.Spec.Template.Labels["job-name"] = "other" }), "spec.template.metadata.labels"},
		{"a selector of its own", job("u2", "n-abcde", func(j *batchv1.Job) { j.Spec.Selector.MatchLabels["app"] = "x" }), "spec.selector.matchLabels"},
	} {
		a := job("u1", "n", nil)
		got := fieldDiff(reflect.ValueOf(ownNamesOut(a)), reflect.ValueOf(ownNamesOut(c.b)), "spec")
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
