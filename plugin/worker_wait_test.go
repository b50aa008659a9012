package plugin_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
)

// publish waits by default (a test node proves the wait that succeeds:
// ceremony/worker/nodetest). Here, without a node, the flags are checked
// before anything is read or written, and a wait that cannot end exits 4
// after the writes, saying what was verified and the pod's state; the
// rerun without a wait is a replay that says it did not wait.
func TestWorkerCLIPublishWait(t *testing.T) {
	ns, stageNS, key, dir := wkSetup(t)
	a := wkDelivery(t, dir, ns, "d-a", "cred-a", "", 1)
	if _, stderr, code := wkRun(t, binary, wkToken("A"), nil, "worker", "stage", "--delivery", a, "--token-file", "-", "--stage-namespace", stageNS); code != 0 {
		t.Fatalf("stage: exit %d\n%s", code, stderr)
	}
	before := len(okWrites(t, "ql3-admin", ns))
	publish := []string{"worker", "publish", "--delivery", a, "--token-digest-key-file", key, "--stage-namespace", stageNS}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--timeout", "0s"}, "--timeout 0s: give a positive duration"},
		{[]string{"--timeout", "-1m"}, "--timeout -1m0s: give a positive duration"},
		{[]string{"--wait=false", "--timeout", "1m"}, "--wait=false does not wait"},
		{[]string{"--timeout", "soon"}, `invalid argument "soon" for "--timeout"`},
	} {
		if out, stderr, code := wkRun(t, binary, nil, nil, append(publish, c.args...)...); code != 2 || out != "" || !strings.Contains(stderr, c.want) {
			t.Fatalf("publish %v: exit %d, want 2 saying %q\n%s%s", c.args, code, c.want, out, stderr)
		}
	}
	if w := okWrites(t, "ql3-admin", ns); len(w) != before {
		t.Fatalf("refused flags wrote %v", w[before:])
	}
	out, stderr, code := wkRun(t, binary, nil, nil, append(publish, "--timeout", "5s")...)
	for _, want := range []string{`carries delivery "d-a"`, "both written and read back", "after waiting 5s the new credential's pod is not Available", "Pending, not yet scheduled", "rerun the same publish to wait again"} {
		if code != 4 || out != "" || !strings.Contains(stderr, want) {
			t.Fatalf("publish with a wait that cannot end: exit %d, want 4 saying %q\n%s%s", code, want, out, stderr)
		}
	}
	dep, err := cp.Clientset().AppsV1().Deployments(ns).Get(context.Background(), "ql3-worker", metav1.GetOptions{})
	if err != nil || dep.Spec.Template.Annotations[delivery.AnnotationDeliveryID] != "d-a" {
		t.Fatalf("after the timed-out wait the Deployment must carry d-a: %v", err)
	}
	out, stderr, code = wkRun(t, binary, nil, nil, append(publish, "--wait=false")...)
	if code != 0 || !strings.Contains(out, "secret/ql3-worker-credential: unchanged; deployment/ql3-worker: unchanged\nrollout: not waited for (--wait=false)\n") {
		t.Fatalf("replay without a wait: exit %d\n%s%s", code, out, stderr)
	}
}
