// Package workertest creates the Worker Deployment the rollout tests run
// against: the reviewed shape of docs/worker.md (one replica, Recreate,
// no API token, a projected volume of the identity and credential
// Secrets) and its TLS identity Secret. Only tests import it
// (internal/arch: test machinery never ships); it imports the worker's
// leaves, never ceremony/worker itself, so that package's own tests can
// use it.
package workertest

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/qinglong/kubectl-ql3/ceremony/worker/audit"
	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
)

// DeploymentName is the Worker Deployment's name.
const DeploymentName = "ql3-worker"

// Create creates the Worker Deployment (the reviewed shape) and the TLS
// identity Secret in ns, as cs.
func Create(t testing.TB, cs kubernetes.Interface, ns string) {
	t.Helper()
	one, no := int32(1), false
	lbl := map[string]string{audit.RoleLabel: audit.RoleValue}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: DeploymentName, Namespace: ns, Labels: lbl},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one, Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl, Annotations: map[string]string{delivery.AnnotationIdentityGeneration: "identity-1"}},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken: &no,
					Containers:                   []corev1.Container{{Name: "worker", Image: "registry.example/worker@sha256:" + strings.Repeat("1", 64)}},
					Volumes: []corev1.Volume{{Name: "sources", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
						{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: delivery.IdentitySecret}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}, {Key: "tls.key", Path: "tls.key"}, {Key: "tls.crt", Path: "tls.crt"}}}},
						{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: delivery.SecretName}, Items: []corev1.KeyToPath{{Key: delivery.SecretKey, Path: "token"}}}},
					}}}}},
				},
			},
		},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	id := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: delivery.IdentitySecret, Namespace: ns}, Data: map[string][]byte{"ca.crt": []byte("ca"), "tls.key": []byte("key"), "tls.crt": []byte("crt")}}
	if _, err := cs.CoreV1().Secrets(ns).Create(context.Background(), id, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Objects is ns's Deployments as unstructured objects, as cfg's user: the
// client publish updates the Deployment through (worker.Options).
func Objects(t testing.TB, cfg *rest.Config, ns string) dynamic.ResourceInterface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dyn.Resource(appsv1.SchemeGroupVersion.WithResource("deployments")).Namespace(ns)
}
