package testcluster

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// PodReady says whether p is Running with its Ready condition true.
func PodReady(p corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// DescribePods is each pod's name, phase and waiting containers' reasons,
// for a failure message.
func DescribePods(pods []corev1.Pod) string {
	var b strings.Builder
	for _, p := range pods {
		b.WriteString(p.Name + " " + string(p.Status.Phase))
		for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if c.State.Waiting != nil {
				b.WriteString(" " + c.Name + " waiting: " + c.State.Waiting.Reason + " " + c.State.Waiting.Message)
			}
		}
		b.WriteString("; ")
	}
	return b.String()
}

// WaitPods lists ns's pods matching selector (GET, every 100 ms) until ok
// holds of them, and returns them; it fails t after timeout, describing the
// pods it saw last.
func (cp *ControlPlane) WaitPods(t testing.TB, ns, selector string, timeout time.Duration, ok func([]corev1.Pod) bool) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := cp.Clientset().CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		pods = list.Items
		return ok(pods), nil
	})
	if err != nil {
		t.Fatalf("pods %s in %s: %v; pods: %s", selector, ns, err, DescribePods(pods))
	}
	return pods
}

// PodLog is container's log of pod ns/name, read through the API server
// (kube-apiserver → kubelet).
func (cp *ControlPlane) PodLog(t testing.TB, ns, name, container string) string {
	t.Helper()
	b, err := cp.Clientset().CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{Container: container}).DoRaw(context.Background())
	if err != nil {
		t.Fatalf("log of pod %s/%s container %q through the API server: %v", ns, name, container, err)
	}
	return string(b)
}
