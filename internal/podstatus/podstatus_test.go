package podstatus

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func pod(phase corev1.PodPhase, node string, conds []corev1.PodCondition, cs ...corev1.ContainerStatus) *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase, Conditions: conds, ContainerStatuses: cs}}
}

func waiting(name, reason, msg string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}
}

func TestCauseAndState(t *testing.T) {
	ready := []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	unsched := []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes are available"}}
	crashed := corev1.ContainerStatus{Name: "w", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: "boom"}}}
	for _, tt := range []struct {
		name  string
		p     *corev1.Pod
		cause string
		stuck bool
		state string
		ready bool
	}{
		{"ready", pod(corev1.PodRunning, "n", ready), "", false, "Running", true},
		{"pending, no node", pod(corev1.PodPending, "", nil), "", false, "Pending, not yet scheduled", false},
		{"unschedulable", pod(corev1.PodPending, "", unsched), "not scheduled: Unschedulable: 0/1 nodes are available", true, "Pending, not scheduled: Unschedulable (0/1 nodes are available)", false},
		{"creating", pod(corev1.PodPending, "n", nil, waiting("w", "ContainerCreating", "")), "", false, "Pending, container w waiting: ContainerCreating", false},
		{"image pull", pod(corev1.PodPending, "n", nil, waiting("w", "ErrImagePull", "no registry")), "container w waiting: ErrImagePull: no registry", true, "Pending, container w waiting: ErrImagePull (no registry)", false},
		{"crashed", pod(corev1.PodRunning, "n", nil, crashed), "container w terminated: exit code 2, Error: boom", true, "Running, container w terminated: Error (boom) (exit 2)", false},
		{"running, not ready", pod(corev1.PodRunning, "n", nil), "", false, "Running, not Ready", false},
	} {
		p := tt.p
		cause, stuck := Cause(p)
		if cause != tt.cause || stuck != tt.stuck || State(p) != tt.state || Ready(p) != tt.ready {
			t.Errorf("%s: Cause %q %v, State %q, Ready %v; want %q %v, %q, %v", tt.name, cause, stuck, State(p), Ready(p), tt.cause, tt.stuck, tt.state, tt.ready)
		}
	}
}
