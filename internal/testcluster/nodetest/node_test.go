// Package nodetest proves the test cluster's node: a Deployment of the
// local workload image, scheduled by kube-scheduler, runs on the kubelet
// with containerd and runc, and its log is read through the API server.
package nodetest

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/internal/testcluster/nodeimage"
)

var cp *testcluster.ControlPlane

func TestMain(m *testing.M) { testcluster.Main(m, testcluster.Options{Node: true}, &cp) }

func TestDeploymentRunsOnTheNode(t *testing.T) {
	t.Logf("node %s Ready %s after the kubelet started", cp.NodeName(), cp.NodeReadyAfter())
	ns := cp.Namespace(t)
	cs := cp.Clientset()
	ctx := context.Background()
	replicas := int32(2)
	labels := map[string]string{"app": "workload"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "workload"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:            "workload",
					Image:           nodeimage.Workload,
					ImagePullPolicy: corev1.PullNever,
					Args:            []string{"-digest", "/etc/hostname"},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
						Exec: &corev1.ExecAction{Command: []string{"/workload", "-get", "http://127.0.0.1:8080/healthz"}},
					}, PeriodSeconds: 1},
				}}},
			},
		},
	}
	created := time.Now()
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=workload"})
		if err != nil {
			return false, err
		}
		pods = list.Items
		return len(pods) == 2 && ready(pods[0]) && ready(pods[1]), nil
	})
	if err != nil {
		t.Fatalf("2 pods Ready: %v; pods: %s", err, describe(pods))
	}
	t.Logf("2 pods Running and Ready %s after the Deployment was created", time.Since(created))
	for _, p := range pods {
		if p.Spec.NodeName != cp.NodeName() {
			t.Fatalf("pod %s on node %q, want the scheduler to have bound it to %s", p.Name, p.Spec.NodeName, cp.NodeName())
		}
	}
	logs, err := cs.CoreV1().Pods(ns).GetLogs(pods[0].Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("pod log through the API server: %v", err)
	}
	if !strings.Contains(string(logs), "digest /etc/hostname sha256:") || !strings.Contains(string(logs), "serving on :8080") {
		t.Fatalf("pod log = %q, want the workload's digest and serving lines", logs)
	}
}

func ready(p corev1.Pod) bool {
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

func describe(pods []corev1.Pod) string {
	var b strings.Builder
	for _, p := range pods {
		b.WriteString(p.Name + " " + string(p.Status.Phase))
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Waiting != nil {
				b.WriteString(" waiting: " + c.State.Waiting.Reason + " " + c.State.Waiting.Message)
			}
		}
		b.WriteString("; ")
	}
	return b.String()
}
