package nodetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/worker"
	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
)

// cli is kubectl-ql3 built with the ql3crash tag: QL3_CRASH_AT=point in
// its environment makes it die by SIGKILL at that point; without it, it is
// the plugin.
type cli struct{ bin, dir string }

func buildCLI(t *testing.T) cli {
	t.Helper()
	dir := t.TempDir()
	c := cli{bin: filepath.Join(dir, "kubectl-ql3"), dir: dir}
	b := exec.Command("go", "build", "-tags", "ql3crash", "-o", c.bin, "github.com/qinglong/kubectl-ql3/cmd/kubectl-ql3")
	if out, err := b.CombinedOutput(); err != nil {
		t.Fatalf("build kubectl-ql3: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// run runs the plugin with stdin and env; code -1 is a death by signal.
// No token may appear in its output.
func (c cli) run(t *testing.T, stdin []byte, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(c.bin, args...)
	var out bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &out, &out
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+cp.AdminKubeconfig), env...)
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	if strings.Contains(out.String(), "CANARY") {
		t.Fatalf("kubectl-ql3 %v printed a token", args)
	}
	return out.String(), code
}

// deliveryFile writes d as the delivery file.
func (c cli) deliveryFile(t *testing.T, d *delivery.Delivery) string {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(c.dir, d.DeliveryID+".json")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// rolledLine is publish's line once its wait saw the new pod Available.
var rolledLine = regexp.MustCompile(`\nrollout: pod (\S+) of ReplicaSet \S+ \(the PodTemplate of credential \S+\) is Available; no pod of an older ReplicaSet is left\n`)

// crashAndRerun stages d with tok through the plugin, runs `worker
// publish`, killed by SIGKILL between the credential Secret write and the
// Deployment write, checks that the running Worker pod prev was left
// alone, then reruns publish and waits for the process running tok. It
// returns the Worker's new run and how long the rerun took to get there.
func crashAndRerun(t *testing.T, c cli, ns, stageNS, prev string, d *delivery.Delivery, tok []byte) (run, time.Duration) {
	t.Helper()
	f := c.deliveryFile(t, d)
	common := []string{"--delivery", f, "--stage-namespace", stageNS}
	if out, code := c.run(t, tok, nil, append([]string{"worker", "stage", "--token-file", "-"}, common...)...); code != 0 {
		t.Fatalf("worker stage: exit %d\n%s", code, out)
	}
	publish := append([]string{"worker", "publish", "--token-digest-key-file", filepath.Join(c.dir, "key")}, common...)
	if out, code := c.run(t, nil, []string{"QL3_CRASH_AT=" + worker.CrashAfterSecret}, publish...); code != -1 {
		t.Fatalf("worker publish with QL3_CRASH_AT: exit %d, want death by SIGKILL\n%s", code, out)
	}
	ctx := context.Background()
	sec, err := cp.Clientset().CoreV1().Secrets(ns).Get(ctx, delivery.SecretName, metav1.GetOptions{})
	if err != nil || !bytes.Equal(sec.Data[delivery.SecretKey], tok) {
		t.Fatalf("after the crash the credential Secret must hold the new token (%v)", err)
	}
	// Nothing restarts the Worker: it still runs the previous credential
	// from its private copy.
	p, err := cp.Clientset().CoreV1().Pods(ns).Get(ctx, prev, metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp != nil {
		t.Fatalf("after the crash the running Worker pod %s must be left alone: %v", prev, err)
	}
	start := time.Now()
	out, code := c.run(t, nil, nil, publish...)
	m := rolledLine.FindStringSubmatch(out)
	if code != 0 || !strings.Contains(out, "secret/ql3-worker-credential: unchanged; deployment/ql3-worker: updated") || m == nil {
		t.Fatalf("rerun of worker publish (waiting by default): exit %d\n%s", code, out)
	}
	pod := onlyPod(t, ns, prev, d, m[1])
	r := waitRunning(t, ns, prev)
	if r.pod.Name != pod {
		t.Fatalf("publish returned with pod %s Available, but pod %s runs", pod, r.pod.Name)
	}
	return r, time.Since(start)
}
