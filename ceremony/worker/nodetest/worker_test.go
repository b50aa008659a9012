// Package nodetest proves the Worker credential rollout on a running pod
// (#25 §2a), with the Worker shaped as ADR-0239 and docs/worker.md specify
// it: one replica, Recreate, one RWO claim, a projected volume of the
// identity and credential Secrets copied by an initContainer into a 0700
// private/ directory of a 4 MiB memory emptyDir, no API token. After each
// publish of A → B → C the running process has the new credential; the
// previous process had exited first; what it wrote to the claim survives;
// no token appears in a log, an event or an object other than its Secrets.
package nodetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/ceremony/worker"
	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
	"github.com/qinglong/kubectl-ql3/ceremony/worker/workertest"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

var cp *testcluster.ControlPlane

func TestMain(m *testing.M) {
	testcluster.Main(m, testcluster.Options{Node: true, AuditLog: true}, &cp)
}

const (
	depName  = "ql3-worker"
	pvcName  = "ql3-worker-state"
	credFile = "/run/ql3/memory/private/token"
	runsFile = "/var/lib/qinglong/runs"
	// uid is the Worker's user (runAsUser, runAsGroup, fsGroup).
	uid = 10001
)

var key = []byte("test-token-digest-key-0123456789abcdef")

// token is a canary: it must appear nowhere but the credential and stage
// Secrets.
func token(n string) []byte { return []byte("CANARY-ql3-worker-token-" + n + "-9f8e7d6c") }

func digest(b []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(b)) }

// workerYAML is ceremony/worker/audit/testdata/base/worker.yaml with the
// test image: the initContainer copies the projected files into private/
// of the memory emptyDir (0700, each file 0400); the worker logs the
// digest of the credential it runs with and records its runs on the claim.
const workerYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ql3-worker
  labels: {qinglong.io/role: worker}
spec:
  replicas: 1
  strategy: {type: Recreate}
  selector:
    matchLabels: {qinglong.io/role: worker}
  template:
    metadata:
      labels: {qinglong.io/role: worker}
      annotations: {qinglong.io/worker-identity-generation: identity-1}
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 10
      securityContext: {runAsNonRoot: true, runAsUser: %[2]d, runAsGroup: %[2]d, fsGroup: %[2]d}
      initContainers:
      - name: private-copy
        image: %[1]s
        imagePullPolicy: Never
        args: [-copy-into, /run/ql3/memory/private, /run/ql3/sources/identity/ca.crt, /run/ql3/sources/identity/tls.crt,
          /run/ql3/sources/identity/tls.key, /run/ql3/sources/credential/token]
        volumeMounts:
        - {name: sources, mountPath: /run/ql3/sources, readOnly: true}
        - {name: private, mountPath: /run/ql3/memory}
      containers:
      - name: worker
        image: %[1]s
        imagePullPolicy: Never
        args: [-digest, /run/ql3/memory/private/token, -record, /var/lib/qinglong/runs]
        volumeMounts:
        - {name: private, mountPath: /run/ql3/memory, readOnly: true}
        - {name: state, mountPath: /var/lib/qinglong}
      volumes:
      - name: sources
        projected:
          defaultMode: 0400
          sources:
          - secret:
              name: ql3-worker-identity
              items:
              - {key: ca.crt, path: identity/ca.crt}
              - {key: tls.key, path: identity/tls.key}
              - {key: tls.crt, path: identity/tls.crt}
          - secret:
              name: ql3-worker-credential
              items:
              - {key: credential-token, path: credential/token}
      - name: private
        emptyDir: {medium: Memory, sizeLimit: 4Mi}
      - name: state
        persistentVolumeClaim: {claimName: ql3-worker-state}
`

// deployWorker creates, in ns, with the image given, the claim bound to a hand-made hostPath
// volume under the test's temporary directory (there is no dynamic
// provisioner), the TLS identity Secret and the Worker Deployment — before
// any credential is published.
func deployWorker(t *testing.T, ns, image string) {
	t.Helper()
	ctx := context.Background()
	cs := cp.Clientset()
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// The Worker runs as uid: it must reach and own its state directory.
	for _, d := range []string{filepath.Dir(filepath.Dir(dir)), filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(dir, uid, uid); err != nil {
		t.Fatal(err)
	}
	pv, class := "ql3-worker-state-"+ns, "ql3-test-manual"
	size := resource.MustParse("64Mi")
	rwo := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	dirType := corev1.HostPathDirectory
	if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pv},
		Spec: corev1.PersistentVolumeSpec{
			Capacity: corev1.ResourceList{corev1.ResourceStorage: size}, AccessModes: rwo, StorageClassName: class,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: pvcName},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &dirType}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().PersistentVolumes().Delete(context.Background(), pv, metav1.DeleteOptions{}) })
	if _, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: pvcName, Labels: map[string]string{worker.RoleLabel: worker.RoleValue}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: rwo, StorageClassName: &class, VolumeName: pv,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	id := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: delivery.IdentitySecret},
		Data: map[string][]byte{"ca.crt": []byte("ca"), "tls.key": []byte("key"), "tls.crt": []byte("crt")}}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, id, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	if err := yaml.UnmarshalStrict([]byte(fmt.Sprintf(workerYAML, image, uid)), &dep); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, &dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// options are the ceremony's, as the admin.
func options(t *testing.T, ns, stageNS string) worker.Options {
	t.Helper()
	cs := cp.Clientset()
	return worker.Options{
		Namespace: ns, Secrets: cs.CoreV1().Secrets(ns), Deployments: cs.AppsV1().Deployments(ns), DeploymentName: depName,
		DeploymentObjects: workertest.Objects(t, cp.RESTConfig(), ns),
		ReplicaSets:       cs.AppsV1().ReplicaSets(ns), Pods: cs.CoreV1().Pods(ns),
		StageNamespace: stageNS, Stages: cs.CoreV1().Secrets(stageNS),
		ClusterIdentity: func(ctx context.Context) (string, error) {
			n, err := cs.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
			if err != nil {
				return "", cas.Classify(cas.OpRead, "read the cluster identity", err)
			}
			return canon.ClusterIdentity(string(n.UID)), nil
		},
		Key: key, Review: access.NewReview(access.NewReviewer(cs)), Say: t.Logf, SettleTimeout: 20 * time.Second,
	}
}

func newDelivery(t *testing.T, o worker.Options, id, cred string, pred *string, gen int64) *delivery.Delivery {
	t.Helper()
	cid, err := o.ClusterIdentity(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d := &delivery.Delivery{Schema: delivery.Schema, DeliveryID: id, CredentialID: cred, Predecessor: pred, Generation: gen,
		Target: delivery.Target{ClusterIdentity: cid, Namespace: o.Namespace, Secret: delivery.SecretName, Key: delivery.SecretKey, Deployment: depName}}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	return d
}

// kubectl runs the control plane's kubectl as the admin, stdin given.
func kubectl(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	bin, err := testcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", cp.AdminKubeconfig}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return out
}
