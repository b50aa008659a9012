package fleet

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/qinglong/kubectl-ql3/ceremony/fleet/plan"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// judge, on a Job that failed (too many failed indexes): index 0
// completed, index 1 failed (its pod exited 3), index 2's pod was made and
// killed with the Job (neither completed nor failed), index 3 never had a
// pod. Index 2 may have begun applying: it is a failure, unavailable (a
// rerun resumes it), not "not started", which the rollout receipt would
// state as untouched. Only pods the Job controls count: a pod for index 3
// made by someone else, with the Job's labels, is not the Job's.
func TestJudgeAnIndexStoppedWithTheJob(t *testing.T) {
	failed := "1"
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: "m", UID: k8stypes.UID("u")},
		Status: batchv1.JobStatus{CompletedIndexes: "0", FailedIndexes: &failed,
			Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "MaxFailedIndexesExceeded"}}}}
	yes := true
	pod := func(name, index string, owned bool, exit *int32) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "m", Labels: map[string]string{"batch.kubernetes.io/controller-uid": "u"},
			Annotations: map[string]string{batchv1.JobCompletionIndexAnnotation: index}}}
		if owned {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "w", UID: "u", Controller: &yes}}
		}
		if exit != nil {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: JobContainer, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: *exit}}}}
		}
		return p
	}
	three := int32(3)
	vj := ViaJob{Client: fake.NewClientset(pod("p0", "0", true, nil), pod("p1", "1", true, &three), pod("p2", "2", true, nil), pod("p3", "3", false, nil))}
	w := plan.Wave{Name: "w", Targets: []plan.Target{{Name: "t0"}, {Name: "t1"}, {Name: "t2"}, {Name: "t3"}}}
	wr := &WaveResult{Targets: make([]TargetResult, 4)}
	for i, pt := range w.Targets {
		wr.Targets[i].Name = pt.Name
	}
	vj.judge(context.Background(), &Options{}, job, w, wr)
	want := []struct {
		state string
		class fail.Class
		text  string
	}{{StateCommitted, 0, ""}, {StateFailed, fail.Conflict, "index 1 failed"}, {StateFailed, fail.Unavailable, "index 2 was stopped when Job m/w finished (Failed (MaxFailedIndexesExceeded)), after its pod was made"}, {StateNotStarted, 0, ""}}
	for i, w := range want {
		r := wr.Targets[i]
		if r.State != w.state || w.text != "" && (!fail.Is(r.err, w.class) || !strings.Contains(r.Error, w.text)) || w.text == "" && r.err != nil {
			t.Errorf("index %d: %s %v, want %s (class %v) %q", i, r.State, r.err, w.state, w.class, w.text)
		}
	}
}
