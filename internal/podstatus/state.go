package podstatus

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Ready says whether p's Ready condition is true.
func Ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// State says where a pod is: its phase, terminating, unscheduled with
// the scheduler's reason, and each container waiting (reason: message)
// or terminated with an error.
func State(p *corev1.Pod) string {
	phase := string(p.Status.Phase)
	if phase == "" {
		phase = "no phase reported yet"
	}
	parts := []string{phase}
	if p.DeletionTimestamp != nil {
		parts = append(parts, "terminating")
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
			parts = append(parts, "not scheduled: "+reason(c.Reason, c.Message))
		}
	}
	if p.Spec.NodeName == "" && len(parts) == 1 {
		parts = append(parts, "not yet scheduled")
	}
	for _, s := range []struct {
		kind string
		sts  []corev1.ContainerStatus
	}{{"init container", p.Status.InitContainerStatuses}, {"container", p.Status.ContainerStatuses}} {
		for _, cs := range s.sts {
			switch st := cs.State; {
			case st.Waiting != nil:
				parts = append(parts, fmt.Sprintf("%s %s waiting: %s", s.kind, cs.Name, reason(st.Waiting.Reason, st.Waiting.Message)))
			case st.Terminated != nil && st.Terminated.ExitCode != 0:
				parts = append(parts, fmt.Sprintf("%s %s terminated: %s (exit %d)", s.kind, cs.Name, reason(st.Terminated.Reason, st.Terminated.Message), st.Terminated.ExitCode))
			}
		}
	}
	if len(parts) == 1 && p.Status.Phase == corev1.PodRunning && !Ready(p) {
		parts = append(parts, "not Ready")
	}
	return strings.Join(parts, ", ")
}

// reason is "Reason (message)", the message cut to 200 bytes.
func reason(r, msg string) string {
	if r == "" {
		r = "no reason given"
	}
	if msg == "" {
		return r
	}
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	return r + " (" + msg + ")"
}
