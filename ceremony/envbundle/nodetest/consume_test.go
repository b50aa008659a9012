// Package nodetest proves an environment bundle on a running pod (#25 §2b):
// a pod consuming the published bundle Secret the way docs/env-bundle.md
// ("Consuming a bundle") says — the Secret mounted as a volume, no subPath,
// the file read on each use, never envFrom — reads exactly the bundle's
// bytes (by digest), and after a republish a restarted pod reads the new
// bundle.
package nodetest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/envbundle"
	"github.com/qinglong/kubectl-ql3/ceremony/envbundle/envcarrier"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/internal/testcluster/nodeimage"
)

var cp *testcluster.ControlPlane

func TestMain(m *testing.M) { testcluster.Main(m, testcluster.Options{Node: true}, &cp) }

const (
	bundleName = "task-env"
	mountDir   = "/var/run/ql3/env-bundle"
	canary     = "ql3-canary-value-7f3a"
	selector   = "app=consumer"
)

func bundle(t *testing.T, value string) *envcarrier.Bundle {
	t.Helper()
	b, err := envcarrier.New([]envcarrier.Entry{{Name: "API_TOKEN", Value: value}, {Name: "DB_URL", Value: "postgres://db:5432/ql"}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func digest(b *envcarrier.Bundle) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(b.Bytes())) }

// consumer is the documented consuming shape: the bundle Secret as a
// volume (the one key as a file, 0400), mounted read-only without subPath,
// read by the process on each use; no environment from the Secret and no
// API token.
func consumer() *appsv1.Deployment {
	replicas := int32(1)
	labels := map[string]string{"app": "consumer"}
	mode, no := int32(0o400), false
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "consumer"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken:  &no,
					TerminationGracePeriodSeconds: new(int64),
					Volumes: []corev1.Volume{{Name: "env-bundle", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
						SecretName: bundleName, DefaultMode: &mode, Optional: &no,
						Items: []corev1.KeyToPath{{Key: envbundle.Key, Path: envbundle.Key}},
					}}}},
					Containers: []corev1.Container{{
						Name:            "consumer",
						Image:           nodeimage.Workload,
						ImagePullPolicy: corev1.PullNever,
						Args:            []string{"-bundle", mountDir + "/" + envbundle.Key},
						VolumeMounts:    []corev1.VolumeMount{{Name: "env-bundle", MountPath: mountDir, ReadOnly: true}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
							Exec: &corev1.ExecAction{Command: []string{"/workload", "-get", "http://127.0.0.1:8080/healthz"}},
						}, PeriodSeconds: 1},
					}},
				},
			},
		},
	}
}

// runningPod waits for the one Ready pod of the consumer that is not gone,
// other than the pod named not.
func runningPod(t *testing.T, ns, not string) corev1.Pod {
	t.Helper()
	var got corev1.Pod
	cp.WaitPods(t, ns, selector, 2*time.Minute, func(pods []corev1.Pod) bool {
		for _, p := range pods {
			if p.Name != not && p.DeletionTimestamp == nil && testcluster.PodReady(p) {
				got = p
				return true
			}
		}
		return false
	})
	return got
}

// readsBundle checks that pod's process logged reading exactly want's
// bytes, and no value of any bundle.
func readsBundle(t *testing.T, ns string, pod corev1.Pod, want *envcarrier.Bundle) {
	t.Helper()
	log := cp.PodLog(t, ns, pod.Name, "consumer")
	line := fmt.Sprintf("bundle %s/%s %s\n", mountDir, envbundle.Key, digest(want))
	if !strings.Contains(log, line) {
		t.Fatalf("pod %s log = %q, want the line %q", pod.Name, log, line)
	}
	if strings.Contains(log, canary) {
		t.Fatalf("pod %s log holds a bundle value", pod.Name)
	}
}

// Publish → a pod mounting the bundle reads exactly its bytes; republish
// with --expected-version → the pod the ReplicaSet makes after the old one
// is deleted reads the new bundle.
func TestPodReadsThePublishedBundle(t *testing.T) {
	ns := cp.Namespace(t)
	ctx := context.Background()
	cs := cp.Clientset()
	o := envbundle.Options{Namespace: ns, Name: bundleName, Secrets: cs.CoreV1().Secrets(ns),
		Review: access.NewReview(access.NewReviewer(cs)), Say: t.Logf}
	b1, b2 := bundle(t, canary+"-1"), bundle(t, canary+"-2")
	r1, err := envbundle.Publish(ctx, o, b1, "")
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	created := time.Now()
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, consumer(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := runningPod(t, ns, "")
	t.Logf("pod %s Ready %s after the Deployment was created", first.Name, time.Since(created))
	readsBundle(t, ns, first, b1)

	if _, err := envbundle.Publish(ctx, o, b2, r1.ResourceVersion); err != nil {
		t.Fatalf("republish: %v", err)
	}
	restarted := time.Now()
	if err := cs.CoreV1().Pods(ns).Delete(ctx, first.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	second := runningPod(t, ns, first.Name)
	t.Logf("pod %s Ready %s after %s was deleted", second.Name, time.Since(restarted), first.Name)
	readsBundle(t, ns, second, b2)

	events, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if strings.Contains(e.Message, canary) || strings.Contains(e.Reason, canary) {
			t.Fatalf("event %s holds a bundle value", e.Name)
		}
	}
}
