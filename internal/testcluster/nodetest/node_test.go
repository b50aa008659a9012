// Package nodetest proves the test cluster's node: a Deployment of the
// local workload image, scheduled by kube-scheduler, runs on the kubelet
// with containerd and runc, and its log is read, and a command run in it
// (kubectl exec), through the API server.
package nodetest

import (
	"context"
	"errors"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	pods := cp.WaitPods(t, ns, "app=workload", 2*time.Minute, func(pods []corev1.Pod) bool {
		return len(pods) == 2 && testcluster.PodReady(pods[0]) && testcluster.PodReady(pods[1])
	})
	t.Logf("2 pods Running and Ready %s after the Deployment was created", time.Since(created))
	for _, p := range pods {
		if p.Spec.NodeName != cp.NodeName() {
			t.Fatalf("pod %s on node %q, want the scheduler to have bound it to %s", p.Name, p.Spec.NodeName, cp.NodeName())
		}
	}
	logs := cp.PodLog(t, ns, pods[0].Name, "")
	if !strings.Contains(logs, "digest /etc/hostname sha256:") || !strings.Contains(logs, "serving on :8080") {
		t.Fatalf("pod log = %q, want the workload's digest and serving lines", logs)
	}
	// kubectl exec through the API server (kube-apiserver → kubelet →
	// containerd): the command runs in the pod's network namespace, and
	// its exit code and output come back.
	kubectl := filepath.Join(cp.BinDir, "kubectl")
	exec := func(url string) (string, error) {
		out, err := osexec.Command(kubectl, "--kubeconfig", cp.AdminKubeconfig, "-n", ns, "exec", pods[0].Name, "--",
			"/workload", "-get", url).CombinedOutput()
		return string(out), err
	}
	if out, err := exec("http://127.0.0.1:8080/healthz"); err != nil {
		t.Fatalf("kubectl exec of the probe on /healthz: %v\n%s", err, out)
	}
	out, err := exec("http://127.0.0.1:8080/no-such-path")
	var ee *osexec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(out, "/no-such-path: HTTP 404") {
		t.Fatalf("kubectl exec of the probe on a missing path: %v\n%s\nwant exit 1 and its HTTP 404", err, out)
	}
}
