package testcluster

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/qinglong/kubectl-ql3/internal/podstatus"
)

// PodReady says whether p is Running with its Ready condition true.
func PodReady(p corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && podstatus.Ready(&p)
}

// DescribePods is each pod's name and where it is (podstatus.State, as
// the ceremonies describe pods), for a failure message.
func DescribePods(pods []corev1.Pod) string {
	var b strings.Builder
	for i := range pods {
		b.WriteString(pods[i].Name + ": " + podstatus.State(&pods[i]) + "; ")
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
