// Package podstatus reads from a pod's status why it is not Ready, for the
// ceremonies that wait for pods (converge in deploy, publish --wait in
// worker): one rule for which causes waiting alone does not clear; and
// one description of where a pod is (State), for their progress and for
// the tests' failure messages.
package podstatus

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// transientWaiting are container waiting reasons that clear by waiting.
var transientWaiting = map[string]bool{"ContainerCreating": true, "PodInitializing": true}

// Cause is why pod p is not Ready ("" when it is, or shows nothing
// yet) and whether waiting alone will not clear it.
func Cause(p *corev1.Pod) (string, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return fmt.Sprintf("not scheduled: %s: %s", c.Reason, c.Message), c.Reason == corev1.PodReasonUnschedulable
		}
	}
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		if cause, stuck := containerCause(cs); cause != "" {
			return cause, stuck
		}
	}
	return "", false
}

// containerCause is what one container's status says is wrong.
func containerCause(cs corev1.ContainerStatus) (string, bool) {
	switch {
	case cs.State.Waiting != nil && !transientWaiting[cs.State.Waiting.Reason]:
		w := cs.State.Waiting
		s := fmt.Sprintf("container %s waiting: %s", cs.Name, w.Reason)
		if w.Message != "" {
			s += ": " + w.Message
		}
		if t := cs.LastTerminationState.Terminated; t != nil {
			s += fmt.Sprintf(" (last exit code %d, %s)", t.ExitCode, t.Reason)
		}
		return s, true
	case cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0:
		t := cs.State.Terminated
		return fmt.Sprintf("container %s terminated: exit code %d, %s: %s", cs.Name, t.ExitCode, t.Reason, t.Message), true
	}
	return "", false
}
