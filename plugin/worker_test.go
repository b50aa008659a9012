package plugin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/worker"
	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
	"github.com/qinglong/kubectl-ql3/ceremony/worker/workertest"
	"github.com/qinglong/kubectl-ql3/internal/faults"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
)

// wkRun runs bin with stdin and returns stdout, stderr and the exit code.
func wkRun(t *testing.T, bin string, stdin []byte, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+cp.AdminKubeconfig), env...)
	stdout, stderr, code := testkit.Run(t, cmd) // code -1: killed by a signal
	for _, s := range []string{stdout, stderr} {
		if strings.Contains(s, "CANARY") {
			t.Fatalf("a token was printed by %v:\n%s", args, s)
		}
	}
	return stdout, stderr, code
}

var (
	crashOnce sync.Once
	crashBin  string
	crashErr  error
)

// crashBinary builds kubectl-ql3 with the ql3crash tag (QL3_CRASH_AT).
func crashBinary(t *testing.T) string {
	t.Helper()
	crashOnce.Do(func() {
		crashBin = filepath.Join(filepath.Dir(binary), "kubectl-ql3-crash")
		b := exec.Command("go", "build", "-tags", "ql3crash", "-o", crashBin, "../cmd/kubectl-ql3")
		b.Stderr = os.Stderr
		crashErr = b.Run()
	})
	if crashErr != nil {
		t.Fatalf("build the crash binary: %v", crashErr)
	}
	return crashBin
}

func wkToken(n string) []byte { return []byte("CANARY-worker-cli-token-" + n + "-0a1b2c3d") }

// wkSetup creates the Worker Deployment, the identity Secret, the stage
// namespace, the key file and returns them.
func wkSetup(t *testing.T) (ns, stageNS, keyFile, dir string) {
	t.Helper()
	ns, stageNS, dir = cp.Namespace(t), cp.Namespace(t), t.TempDir()
	workertest.Create(t, cp.Clientset(), ns)
	keyFile = filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("cli-test-token-digest-key-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return ns, stageNS, keyFile, dir
}

func wkDelivery(t *testing.T, dir, ns, id, cred, pred string, gen int) string {
	t.Helper()
	p := "null"
	if pred != "" {
		p = pred
	}
	doc := "schema: " + delivery.Schema + "\ndeliveryId: " + id + "\ncredentialId: " + cred + "\npredecessorCredentialId: " + p +
		"\ndeploymentGeneration: " + delivery.GenerationString(int64(gen)) + "\ntarget:\n  clusterIdentity: " + kubeSystemIdentity(t) +
		"\n  namespace: " + ns + "\n  secret: ql3-worker-credential\n  key: credential-token\n  deployment: ql3-worker\n"
	path := filepath.Join(dir, id+".yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A → B → C through the built binary, tokens on stdin: distinct
// publication digests, replays, a refused wrong predecessor before any
// Secret write, and the canary: no token in any output (wkRun), argument,
// annotation, label, event or file.
func TestWorkerCLI(t *testing.T) {
	ns, stageNS, key, dir := wkSetup(t)
	var digests []string
	for _, s := range []struct{ id, cred, pred, tok string }{{"d-a", "cred-a", "", "A"}, {"d-b", "cred-b", "cred-a", "B"}, {"d-c", "cred-c", "cred-b", "C"}} {
		gen := len(digests) + 1
		f := wkDelivery(t, dir, ns, s.id, s.cred, s.pred, gen)
		if _, stderr, code := wkRun(t, binary, wkToken(s.tok), nil, "worker", "stage", "--delivery", f, "--token-file", "-", "--stage-namespace", stageNS); code != 0 {
			t.Fatalf("stage %s: exit %d\n%s", s.id, code, stderr)
		}
		out, stderr, code := wkRun(t, binary, nil, nil, "worker", "publish", "--wait=false", "--delivery", f, "--token-digest-key-file", key, "--stage-namespace", stageNS, "-o", "json")
		if code != 0 {
			t.Fatalf("publish %s: exit %d\n%s", s.id, code, stderr)
		}
		var res worker.Result
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.CredentialID != s.cred || res.DeploymentAction != "updated" || res.Rollout != worker.RolloutNotWaited {
			t.Fatalf("publish %s: %v %+v", s.id, err, res)
		}
		for _, d := range digests {
			if d == res.PublicationDigest {
				t.Fatal("publication digest repeated")
			}
		}
		digests = append(digests, res.PublicationDigest)
		out, _, code = wkRun(t, binary, nil, nil, "worker", "publish", "--wait=false", "--delivery", f, "--token-digest-key-file", key, "--stage-namespace", stageNS)
		if code != 0 || !strings.Contains(out, "deployment/ql3-worker: unchanged\nrollout: not waited for (--wait=false)\n") {
			t.Fatalf("replay: exit %d\n%s", code, out)
		}
	}
	// Wrong predecessor: exit 3 before any Secret write.
	bad := wkDelivery(t, dir, ns, "d-x", "cred-x", "cred-a", 9)
	wkRun(t, binary, wkToken("X"), nil, "worker", "stage", "--delivery", bad, "--token-file", "-", "--stage-namespace", stageNS)
	evs, _ := cp.Writes(func(e testcluster.AuditEvent) bool {
		return e.ObjectRef.Namespace == ns && e.ObjectRef.Resource == "secrets"
	})
	before := len(evs)
	if _, stderr, code := wkRun(t, binary, nil, nil, "worker", "publish", "--wait=false", "--delivery", bad, "--token-digest-key-file", key, "--stage-namespace", stageNS); code != 3 || !strings.Contains(stderr, "predecessor") {
		t.Fatalf("wrong predecessor: exit %d\n%s", code, stderr)
	}
	evs, _ = cp.Writes(func(e testcluster.AuditEvent) bool {
		return e.ObjectRef.Namespace == ns && e.ObjectRef.Resource == "secrets"
	})
	if len(evs) != before {
		t.Fatal("a refused publish wrote a Secret")
	}
	// The canary: nowhere but the Secrets.
	ctx := context.Background()
	dep, _ := cp.Clientset().AppsV1().Deployments(ns).Get(ctx, "ql3-worker", metav1.GetOptions{})
	b, _ := json.Marshal(dep)
	events, _ := cp.Clientset().CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	e, _ := json.Marshal(events)
	if bytes.Contains(b, []byte("CANARY")) || bytes.Contains(e, []byte("CANARY")) {
		t.Fatal("a token appears in the Deployment or an event")
	}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if data, _ := os.ReadFile(p); bytes.Contains(data, []byte("CANARY")) {
				t.Errorf("a token appears in the file %s", p)
			}
		}
		return nil
	})
	// discard-stage of a published delivery; the live audit is clean but
	// for the release rules a bare test Deployment does not meet.
	out, stderr, code := wkRun(t, binary, nil, nil, "worker", "discard-stage", "-n", ns, "--delivery-id", "d-a", "--deployment", "ql3-worker", "--stage-namespace", stageNS)
	if code != 0 || !strings.Contains(out, "deleted (superseded)") {
		t.Fatalf("discard-stage: exit %d\n%s%s", code, out, stderr)
	}
}

// SIGKILL between the Secret and the Deployment writes, then a rerun:
// converges without rewriting the Secret.
func TestWorkerCLICrash(t *testing.T) {
	ns, stageNS, key, dir := wkSetup(t)
	bin := crashBinary(t)
	a := wkDelivery(t, dir, ns, "d-a", "cred-a", "", 1)
	wkRun(t, binary, wkToken("A"), nil, "worker", "stage", "--delivery", a, "--token-file", "-", "--stage-namespace", stageNS)
	if _, stderr, code := wkRun(t, binary, nil, nil, "worker", "publish", "--wait=false", "--delivery", a, "--token-digest-key-file", key, "--stage-namespace", stageNS); code != 0 {
		t.Fatal(stderr)
	}
	bd := wkDelivery(t, dir, ns, "d-b", "cred-b", "cred-a", 2)
	wkRun(t, binary, wkToken("B"), nil, "worker", "stage", "--delivery", bd, "--token-file", "-", "--stage-namespace", stageNS)
	_, _, code := wkRun(t, bin, nil, []string{"QL3_CRASH_AT=" + worker.CrashAfterSecret}, "worker", "publish", "--wait=false", "--delivery", bd, "--token-digest-key-file", key, "--stage-namespace", stageNS)
	if code != -1 {
		t.Fatalf("the crash binary exited %d, want killed", code)
	}
	ctx := context.Background()
	sec, _ := cp.Clientset().CoreV1().Secrets(ns).Get(ctx, delivery.SecretName, metav1.GetOptions{})
	if string(sec.Data[delivery.SecretKey]) != string(wkToken("B")) {
		t.Fatal("the crash was not after the Secret write")
	}
	out, stderr, code := wkRun(t, binary, nil, nil, "worker", "publish", "--wait=false", "--delivery", bd, "--token-digest-key-file", key, "--stage-namespace", stageNS)
	if code != 0 || !strings.Contains(out, "secret/ql3-worker-credential: unchanged; deployment/ql3-worker: updated\nrollout: started, not waited for (--wait=false)") {
		t.Fatalf("rerun: exit %d\n%s%s", code, out, stderr)
	}
	if s, _ := cp.Clientset().CoreV1().Secrets(ns).Get(ctx, delivery.SecretName, metav1.GetOptions{}); s.ResourceVersion != sec.ResourceVersion {
		t.Fatal("the rerun rewrote the Secret")
	}
}

// Lost answers of the Secret and Deployment writes through a proxy in
// front of the binary settle by reading back.
func TestWorkerCLILostAnswers(t *testing.T) {
	ns, stageNS, key, dir := wkSetup(t)
	drops := []*faults.Fault{
		faults.NewDrop(faults.Write(http.MethodPost, "/namespaces/"+ns+"/secrets")),
		faults.NewDrop(faults.Write(http.MethodPut, "/namespaces/"+ns+"/deployments/ql3-worker")),
	}
	env := proxied(t, ns, func(rt http.RoundTripper) http.RoundTripper {
		for _, f := range drops {
			rt = f.Wrap(rt)
		}
		return rt
	})
	a := wkDelivery(t, dir, ns, "d-a", "cred-a", "", 1)
	wkRun(t, binary, wkToken("A"), nil, "worker", "stage", "--delivery", a, "--token-file", "-", "--stage-namespace", stageNS)
	out, stderr, code := wkRun(t, binary, nil, env, "worker", "publish", "--wait=false", "--delivery", a, "--token-digest-key-file", key, "--stage-namespace", stageNS)
	if code != 0 || !strings.Contains(out, "settled") {
		t.Fatalf("publish through lost answers: exit %d\n%s%s", code, out, stderr)
	}
	for i, f := range drops {
		if f.Fired() != 1 {
			t.Fatalf("fault %d fired %d times", i, f.Fired())
		}
	}
}

// worker audit: the clean testdata release passes; rbac refuses a stage
// namespace equal to the Worker's.
func TestWorkerAuditAndRBACCLI(t *testing.T) {
	if out, stderr, code := wkRun(t, binary, nil, nil, "worker", "audit", "../ceremony/worker/audit/testdata/deployable", "--deployable"); code != 0 || !strings.Contains(out, "no findings") {
		t.Fatalf("clean release: exit %d\n%s%s", code, out, stderr)
	}
	out, _, code := wkRun(t, binary, nil, nil, "worker", "audit", "../ceremony/worker/audit/testdata/rules/recreate", "-o", "json")
	if code != 2 || !strings.Contains(out, `"rule": "recreate"`) {
		t.Fatalf("recreate fixture: exit %d\n%s", code, out)
	}
	if _, stderr, code := wkRun(t, binary, nil, nil, "worker", "rbac", "-n", "qinglong", "--deployment", "ql3-worker", "--stage-namespace", "qinglong"); code != 2 || !strings.Contains(stderr, "--stage-namespace") {
		t.Fatalf("rbac with the Worker namespace for stages: exit %d\n%s", code, stderr)
	}
	out, _, code = wkRun(t, binary, nil, nil, "worker", "rbac", "-n", "qinglong", "--deployment", "ql3-worker", "--stage-namespace", "qinglong-stages")
	if code != 0 || strings.Contains(out, delivery.IdentitySecret+"\n") || strings.Contains(out, "patch") || strings.Contains(out, "watch") {
		t.Fatalf("rbac: exit %d\n%s", code, out)
	}
}
