package plugin_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/worker"
	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
)

// Through the built binary: stage, publish and discard-stage refuse a
// stage namespace that is unset or the Worker's own (exit 2, saying what
// to do) and write no stage there; a stage records its Deployment, so
// discard-stage needs no --deployment and refuses one that disagrees.
func TestWorkerCLIStageNamespaceAndDeployment(t *testing.T) {
	ns, stageNS, key, dir := wkSetup(t)
	ctx := context.Background()
	a := wkDelivery(t, dir, ns, "d-a", "cred-a", "", 1)
	for _, flags := range [][]string{nil, {"--stage-namespace", ns}} {
		for _, args := range [][]string{
			{"worker", "stage", "--delivery", a, "--token-file", "-"},
			{"worker", "publish", "--wait=false", "--delivery", a, "--token-digest-key-file", key},
			{"worker", "discard-stage", "-n", ns, "--delivery-id", "d-a", "--abandon"},
		} {
			_, stderr, code := wkRun(t, binary, wkToken("A"), nil, append(args, flags...)...)
			if code != 2 || !strings.Contains(stderr, "--stage-namespace: give a namespace of its own") || !strings.Contains(stderr, delivery.IdentitySecret) {
				t.Fatalf("%v %v: exit %d, want 2 refusing the stage namespace:\n%s", args, flags, code, stderr)
			}
		}
	}
	stages, err := cp.Clientset().CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: worker.LabelStage + "=true"})
	if err != nil || len(stages.Items) != 0 {
		t.Fatalf("stage Secrets in the Worker's namespace: %v %v", stages, err)
	}

	if _, stderr, code := wkRun(t, binary, wkToken("A"), nil, "worker", "stage", "--delivery", a, "--token-file", "-", "--stage-namespace", stageNS); code != 0 {
		t.Fatalf("stage: exit %d\n%s", code, stderr)
	}
	dep, err := cp.Clientset().AppsV1().Deployments(ns).Get(ctx, "ql3-worker", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := cp.Clientset().CoreV1().Secrets(stageNS).Get(ctx, delivery.StageName("d-a"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Annotations[worker.AnnotationDeployment] != ns+"/ql3-worker" || st.Annotations[worker.AnnotationDeploymentUID] != string(dep.UID) {
		t.Fatalf("stage annotations %v: want the Deployment %s/ql3-worker, UID %s", st.Annotations, ns, dep.UID)
	}
	if _, stderr, code := wkRun(t, binary, nil, nil, "worker", "publish", "--wait=false", "--delivery", a, "--token-digest-key-file", key, "--stage-namespace", stageNS); code != 0 {
		t.Fatalf("publish: exit %d\n%s", code, stderr)
	}
	_, stderr, code := wkRun(t, binary, nil, nil, "worker", "discard-stage", "-n", ns, "--delivery-id", "d-a", "--deployment", "other-worker", "--stage-namespace", stageNS)
	if code != 2 || !strings.Contains(stderr, "was staged for Deployment "+ns+"/ql3-worker") {
		t.Fatalf("discard-stage --deployment other-worker: exit %d, want 2 naming the recorded Deployment\n%s", code, stderr)
	}
	if _, err := cp.Clientset().CoreV1().Secrets(stageNS).Get(ctx, delivery.StageName("d-a"), metav1.GetOptions{}); err != nil {
		t.Fatalf("the refused discard-stage removed the stage: %v", err)
	}
	out, stderr, code := wkRun(t, binary, nil, nil, "worker", "discard-stage", "-n", ns, "--delivery-id", "d-a", "--stage-namespace", stageNS)
	if code != 0 || !strings.Contains(out, "deleted (published)") {
		t.Fatalf("discard-stage without --deployment: exit %d\n%s%s", code, out, stderr)
	}
}
