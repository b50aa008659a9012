package plugin_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/faults"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
	"github.com/qinglong/kubectl-ql3/plugin"
	"github.com/qinglong/kubectl-ql3/receipts"
)

var nsSerial atomic.Int64

// controlNamespace creates a fresh control namespace (the Head lives there,
// so it exists before the first install) and deletes it afterwards.
func controlNamespace(t *testing.T) string {
	t.Helper()
	name := "p" + strconv.FormatInt(nsSerial.Add(1), 10) + "-" + regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(t.Name()), "-")
	if len(name) > 50 {
		name = strings.TrimRight(name[:50], "-")
	}
	cs := cp.Clientset()
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

// releaseCopy copies a fixture, retargets it to namespace ns (and relabels
// it as version if given), and locks it with `kubectl ql3 lock` against the
// test cluster.
func releaseCopy(t *testing.T, fixture, ns, version string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), fixture)
	src := filepath.Join("..", "testdata", "releases", fixture)
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() == "ql3.lock.yaml" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "kustomization.yaml" {
			data = []byte(strings.Replace(string(data), "namespace: ql3-demo", "namespace: "+ns, 1))
			if version != "" {
				data = regexp.MustCompile(`app.kubernetes.io/version: .*`).ReplaceAll(data, []byte("app.kubernetes.io/version: "+version))
			}
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if version == "" {
		version = strings.TrimPrefix(strings.SplitN(fixture, "-", 2)[0], "v")
	}
	if _, stderr, code := run(t, nil, "lock", dir, "--version", version); code != 0 {
		t.Fatalf("lock %s: exit %d: %s", dir, code, stderr)
	}
	return dir
}

func headToken(t *testing.T, env []string, ns string) string {
	t.Helper()
	out, stderr, code := run(t, env, "head", "-n", ns, "-o", "json")
	if code != 0 {
		t.Fatalf("head: exit %d: %s", code, stderr)
	}
	var rep plugin.HeadReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	return rep.ExpectedHead
}

func mustRun(t *testing.T, env []string, args ...string) string {
	t.Helper()
	out, stderr, code := run(t, env, args...)
	if code != 0 {
		t.Fatalf("kubectl ql3 %s: exit %d\n%s", strings.Join(args, " "), code, stderr)
	}
	return out
}

// The whole ceremony through the built binary: lock, head, preflight,
// apply, upgrade, rollback and an offline audit of the receipts.
func TestCLICeremony(t *testing.T) {
	ns := controlNamespace(t)
	v300 := releaseCopy(t, "v3.0.0", ns, "")
	v310 := releaseCopy(t, "v3.1.0", ns, "")
	v311 := releaseCopy(t, "v3.1.1", ns, "")
	work := t.TempDir()
	rdir := filepath.Join(work, "receipts")

	if tok := headToken(t, nil, ns); tok != deploy.AbsentToken {
		t.Fatalf("fresh namespace token %q", tok)
	}
	step := func(name, dir, kind string) {
		pf := filepath.Join(work, name+".json")
		mustRun(t, nil, "preflight", dir, "--transition", kind, "--expected-head", headToken(t, nil, ns), "--out", pf)
		out := mustRun(t, nil, "apply", "--preflight", pf, "--receipts-dir", rdir, "-o", "json")
		var res deploy.ApplyResult
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Outcome != "committed" {
			t.Fatalf("apply %s: %v %s", name, err, out)
		}
		// The same apply again is a replay: exit 0, nothing written.
		out, stderr, code := run(t, nil, "apply", "--preflight", pf, "--receipts-dir", rdir)
		if code != 0 || !strings.Contains(out, "replayed") || !strings.Contains(stderr, "replay, no workload write") {
			t.Fatalf("replay of %s: exit %d\n%s\n%s", name, code, out, stderr)
		}
	}
	step("install", v300, "install")
	step("upgrade", v310, "upgrade")

	// A preflight that goes stale: exit 3 (conflict), before any workload write.
	stale := filepath.Join(work, "stale.json")
	v320 := releaseCopy(t, "v3.1.0", ns, "3.2.0")
	mustRun(t, nil, "preflight", v320, "--transition", "upgrade", "--expected-head", headToken(t, nil, ns), "--out", stale)
	step("upgrade2", v311, "upgrade")
	if _, stderr, code := run(t, nil, "apply", "--preflight", stale, "--receipts-dir", rdir); code != 3 || !strings.Contains(stderr, "error: head: moved since the preflight") {
		t.Fatalf("stale preflight: exit %d: %s", code, stderr)
	}
	// The preflight record is never replaced.
	if _, stderr, code := run(t, nil, "preflight", v320, "--transition", "upgrade", "--expected-head", headToken(t, nil, ns), "--out", stale); code != 2 || !strings.Contains(stderr, "already exists") {
		t.Fatalf("preflight over an existing record: exit %d: %s", code, stderr)
	}

	out, stderr, code := run(t, nil, "rollback", v310, "--expected-head", headToken(t, nil, ns), "--out", filepath.Join(work, "rollback.json"), "--receipts-dir", rdir)
	if code != 0 || !strings.Contains(out, "committed: generation 4, rollback 3.1.0") {
		t.Fatalf("rollback: exit %d\n%s\n%s", code, out, stderr)
	}
	human := mustRun(t, nil, "head", "-n", ns)
	if !strings.Contains(human, "Generation:  4 (committed)") || !strings.Contains(human, "Previous:    3.1.1") {
		t.Fatalf("head:\n%s", human)
	}
	audit := mustRun(t, nil, "receipt", "audit", rdir, "--release", v310)
	if !strings.Contains(audit, "000004-rollback-3.1.0.receipt.json") {
		t.Fatalf("audit:\n%s", audit)
	}
}

// Two apply processes from the same preflight race for the Head: exactly
// one commits; the other exits "conflict" and, by the API server's own
// audit log, wrote nothing but its lost Head race. The race is driven, not
// hoped for: each process talks through a proxy that holds its Head create
// until both have sent one, and holds every server-side apply until one
// process has exited — so the loser's 409 and its reading of the winner's
// applying Head happen before the winner can commit (otherwise, on a loaded
// machine, the second process may start after the first committed and
// rightly replay).
func TestRacingApplyProcesses(t *testing.T) {
	ns := controlNamespace(t)
	dir := releaseCopy(t, "v3.0.0", ns, "")
	pf := filepath.Join(t.TempDir(), "pf.json")
	mustRun(t, nil, "preflight", dir, "--transition", "install", "--expected-head", deploy.AbsentToken, "--out", pf)

	users := []string{"racer-a-" + ns, "racer-b-" + ns}
	type outcome struct {
		user   string
		code   int
		stderr string
		took   time.Duration
	}
	results := make([]outcome, len(users))
	var wg sync.WaitGroup
	start := make(chan struct{})
	both, oneExited := make(chan struct{}), make(chan struct{})
	var creates atomic.Int32
	var exited sync.Once
	hold := func(ch <-chan struct{}) {
		select {
		case <-ch:
		case <-time.After(2 * time.Minute): // a bound, not a pace: a run that needed it fails below
		}
	}
	isCreate := headWrite(ns, http.MethodPost, "applying")
	wrap := func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			var body []byte
			if r.Body != nil {
				var err error
				if body, err = io.ReadAll(r.Body); err != nil {
					return nil, err
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			switch {
			case isCreate(r, body):
				if creates.Add(1) == 2 {
					close(both)
				}
				hold(both)
			case r.Method == http.MethodPatch && r.URL.Query().Get("dryRun") == "": // the access check's dry runs pass
				hold(oneExited)
			}
			return rt.RoundTrip(r)
		})
	}
	for i, u := range users {
		p, err := faults.NewProxy(cp.User(t, u, "system:masters"), wrap)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		kc := filepath.Join(t.TempDir(), "proxy.kubeconfig")
		if err := p.Kubeconfig(kc, ns); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			began := time.Now()
			_, stderr, code := run(t, []string{"KUBECONFIG=" + kc}, "apply", "--preflight", pf, "--receipts-dir", filepath.Join(t.TempDir(), "r"))
			results[i] = outcome{u, code, stderr, time.Since(began)}
			exited.Do(func() { close(oneExited) })
		}()
	}
	close(start)
	wg.Wait()
	for _, r := range results {
		if r.took >= 2*time.Minute {
			t.Fatalf("%s waited out a hold (%s): the race was not run as driven", r.user, r.took)
		}
	}
	if n := creates.Load(); n != 2 {
		t.Fatalf("%d Head creates reached the proxies, want 2: the race was not run: %+v", n, results)
	}
	var winners, losers []outcome
	for _, r := range results {
		switch r.code {
		case 0:
			winners = append(winners, r)
		case 3:
			losers = append(losers, r)
		default:
			t.Fatalf("%s: exit %d: %s", r.user, r.code, r.stderr)
		}
	}
	if len(winners) != 1 || len(losers) != 1 {
		t.Fatalf("winners %v, losers %v: want exactly one of each", winners, losers)
	}
	writes, err := cp.Writes(func(e testcluster.AuditEvent) bool {
		return e.User.Username == losers[0].user && e.ObjectRef.Name != deploy.HeadName
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(writes) != 0 {
		t.Fatalf("the loser %s wrote %d workload object(s): %+v", losers[0].user, len(writes), writes[0].ObjectRef)
	}
	winnerWrites, _ := cp.Writes(func(e testcluster.AuditEvent) bool {
		return e.User.Username == winners[0].user && e.Verb == "patch" && e.ResponseStatus.Code == 200
	})
	if len(winnerWrites) == 0 {
		t.Fatal("the audit log shows no server-side apply by the winner: the evidence is broken")
	}
	var h plugin.HeadReport
	json.Unmarshal([]byte(mustRun(t, nil, "head", "-n", ns, "-o", "json")), &h)
	if h.Head == nil || h.Head.Generation != 1 || h.Head.Phase != deploy.PhaseCommitted {
		t.Fatalf("head after the race: %+v", h.Head)
	}
}

// SIGKILL during the object applies leaves the Head applying; apply then
// refuses (another apply may be running) and resume converges.
func TestKillDuringApplyThenResume(t *testing.T) {
	ns := controlNamespace(t)
	dir := releaseCopy(t, "v3.0.0", ns, "")
	work := t.TempDir()
	pf := filepath.Join(work, "pf.json")
	rdir := filepath.Join(work, "receipts")
	mustRun(t, nil, "preflight", dir, "--transition", "install", "--expected-head", deploy.AbsentToken, "--out", pf)

	// One object at a time, two requests a second: the applies take seconds.
	cmd := exec.Command(binary, "apply", "--preflight", pf, "--receipts-dir", rdir, "--parallelism", "1", "--qps", "2", "--burst", "1")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.AdminKubeconfig)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cms := cp.Clientset().CoreV1().ConfigMaps(ns)
	deadline := time.Now().Add(60 * time.Second)
	// Kill once the cluster holds an object of the release: the applies
	// have begun (an event observed on the server, not a guessed delay).
	if n := waitReleaseObjects(t, ns, deadline); n == 0 {
		cmd.Process.Kill()
		t.Fatalf("no object of the release appeared:\n%s", stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	cm, err := cms.Get(context.Background(), deploy.HeadName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := deploy.ParseHeadConfigMap(cm)
	if err != nil || h.Phase != deploy.PhaseApplying {
		t.Fatalf("after SIGKILL the Head should be applying: %+v %v\n%s", h, err, stderr.String())
	}
	if _, stderr, code := run(t, nil, "apply", "--preflight", pf, "--receipts-dir", rdir); code != 3 || !strings.Contains(stderr, "kubectl ql3 resume") {
		t.Fatalf("apply on an applying Head: exit %d: %s", code, stderr)
	}
	out := mustRun(t, nil, "resume", "--preflight", pf, "--receipts-dir", rdir)
	if !strings.Contains(out, "committed: generation 1, install 3.0.0") {
		t.Fatalf("resume:\n%s", out)
	}
	mustRun(t, nil, "receipt", "audit", rdir)
}

// The restricted user holding exactly `kubectl ql3 rbac` can run the
// ceremony; without the Head's update it fails closed before any workload
// write.
func TestLeastPrivilege(t *testing.T) {
	ns := controlNamespace(t)
	v300 := releaseCopy(t, "v3.0.0", ns, "")
	v310 := releaseCopy(t, "v3.1.0", ns, "")
	work := t.TempDir()
	grant := func(dir, user string, drop func(yaml string) string) {
		rbac := mustRun(t, nil, "rbac", dir, "--bind-user", user)
		if drop != nil {
			rbac = drop(rbac)
		}
		cp.KubectlApply(t, rbac)
	}
	deployer := "deployer-" + ns
	grant(v300, deployer, nil)
	kc, err := cp.Kubeconfig(deployer)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"KUBECONFIG=" + kc}
	pf := filepath.Join(work, "install.json")
	mustRun(t, env, "preflight", v300, "--transition", "install", "--expected-head", headToken(t, env, ns), "--out", pf)
	mustRun(t, env, "apply", "--preflight", pf, "--receipts-dir", filepath.Join(work, "r"))

	// A second deployer gets the v3.1.0 grant minus the Head's update.
	second := "deployer2-" + ns
	grant(v310, second, func(y string) string {
		return strings.Replace(y, "- get\n  - update\n", "- get\n", 1)
	})
	role, err := cp.Clientset().RbacV1().Roles(ns).Get(context.Background(), deploy.RBACRoleName(ns), metav1.GetOptions{})
	if err != nil || slices.Contains(role.Rules[0].Verbs, "update") {
		t.Fatalf("the Head's update was not removed: %+v %v", role, err)
	}
	kc2, _ := cp.Kubeconfig(second)
	env2 := []string{"KUBECONFIG=" + kc2}
	pf2 := filepath.Join(work, "upgrade.json")
	// The access check refuses it at preflight, and at apply (with a
	// preflight made by someone who holds the update), before any write.
	_, stderr, code := run(t, env2, "preflight", v310, "--transition", "upgrade", "--expected-head", headToken(t, env2, ns), "--out", filepath.Join(work, "refused.json"))
	if code != 2 || !strings.Contains(stderr, "update configmaps/"+deploy.HeadName) {
		t.Fatalf("preflight without the Head's update: exit %d: %s", code, stderr)
	}
	mustRun(t, nil, "preflight", v310, "--transition", "upgrade", "--expected-head", headToken(t, nil, ns), "--out", pf2)
	_, stderr, code = run(t, env2, "apply", "--preflight", pf2, "--receipts-dir", filepath.Join(work, "r"))
	if code != 2 || !strings.Contains(stderr, "update configmaps/"+deploy.HeadName) {
		t.Fatalf("apply without the Head's update: exit %d: %s", code, stderr)
	}
	writes, err := cp.Writes(func(e testcluster.AuditEvent) bool { return e.User.Username == second && e.ResponseStatus.Code < 300 })
	if err != nil || len(writes) != 0 {
		t.Fatalf("%s wrote %d object(s) without holding the Head: %v", second, len(writes), err)
	}
}

// A tampered Head makes `kubectl ql3 head` exit 5.
func TestHeadTamperExitCode(t *testing.T) {
	ns := controlNamespace(t)
	dir := releaseCopy(t, "v3.0.0", ns, "")
	pf := filepath.Join(t.TempDir(), "pf.json")
	mustRun(t, nil, "preflight", dir, "--transition", "install", "--expected-head", deploy.AbsentToken, "--out", pf)
	mustRun(t, nil, "apply", "--preflight", pf, "--receipts-dir", t.TempDir())
	cms := cp.Clientset().CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(context.Background(), deploy.HeadName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Labels["edited-by"] = "hand"
	if _, err := cms.Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := run(t, nil, "head", "-n", ns)
	if code != 5 || !strings.HasPrefix(stderr, "error: head: ") {
		t.Fatalf("head on a tampered Head: exit %d: %s", code, stderr)
	}
}

// lockedBuffer is a bytes.Buffer safe to read while a child process writes it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func writeEd25519(t *testing.T, dir, name string) (priv, pub string) {
	t.Helper()
	pk, sk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	skDER, err := x509.MarshalPKCS8PrivateKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	pkDER, err := x509.MarshalPKIXPublicKey(pk)
	if err != nil {
		t.Fatal(err)
	}
	priv, pub = filepath.Join(dir, name+".key"), filepath.Join(dir, name+".pub")
	os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: skDER}), 0o600)
	os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkDER}), 0o644)
	return priv, pub
}

// apply --sign-key signs the receipt; the audit requires a trusted key's
// signature when given --trusted-key, and a forged one fails with exit 5.
func TestSignedReceipts(t *testing.T) {
	ns := controlNamespace(t)
	dir := releaseCopy(t, "v3.0.0", ns, "")
	work := t.TempDir()
	key, pub := writeEd25519(t, work, "ops")
	_, otherPub := writeEd25519(t, work, "other")
	pf := filepath.Join(work, "pf.json")
	rdir := filepath.Join(work, "receipts")
	mustRun(t, nil, "preflight", dir, "--transition", "install", "--expected-head", deploy.AbsentToken, "--out", pf)
	mustRun(t, nil, "apply", "--preflight", pf, "--receipts-dir", rdir, "--sign-key", key)
	sigs, _ := filepath.Glob(filepath.Join(rdir, "*.sig"))
	if len(sigs) != 1 {
		t.Fatalf("signatures: %v", sigs)
	}
	out := mustRun(t, nil, "receipt", "audit", rdir, "--trusted-key", pub)
	if !strings.Contains(out, "verified") {
		t.Fatalf("audit with the signer's key:\n%s", out)
	}
	if out, _, code := run(t, nil, "receipt", "audit", rdir, "--trusted-key", otherPub); code != 5 {
		t.Fatalf("audit with an untrusted key: exit %d\n%s", code, out)
	}
	// The attestation (in-toto in DSSE) is written beside the receipt and
	// verified by the audit; one changed byte of it fails the audit, exit 5.
	atts, _ := filepath.Glob(filepath.Join(rdir, "*.intoto.json"))
	if len(atts) != 1 || strings.TrimSuffix(atts[0], ".intoto.json") != strings.TrimSuffix(sigs[0], ".receipt.json.sig") {
		t.Fatalf("attestations: %v", atts)
	}
	var rep struct {
		Receipts []struct{ Attestation string }
	}
	if err := json.Unmarshal([]byte(mustRun(t, nil, "receipt", "audit", rdir, "--trusted-key", pub, "-o", "json")), &rep); err != nil ||
		len(rep.Receipts) != 1 || rep.Receipts[0].Attestation != "verified" {
		t.Fatalf("audit -o json: %+v %v", rep, err)
	}
	// The commands a verifier runs: the release as applied, written by
	// render --subject, is a subject cosign verifies with the receipt's
	// public key; the audit against the release agrees.
	render := filepath.Join(work, "release.render")
	if err := os.WriteFile(render, []byte(mustRun(t, nil, "render", dir, "--subject", receipts.RenderSubject)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := testkit.CosignVerifyAttestation(t, pub, receipts.PredicateType, atts[0], render); code != 0 || !strings.Contains(out, "Verified OK") {
		t.Fatalf("cosign verify-blob-attestation of the rendered release: exit %d\n%s", code, out)
	}
	if out := mustRun(t, nil, "receipt", "audit", rdir, "--trusted-key", pub, "--release", dir); !strings.Contains(out, "release: ok") {
		t.Fatalf("audit --release:\n%s", out)
	}
	env, err := os.ReadFile(atts[0])
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(env, []byte(`"sig":"`)) + len(`"sig":"`) + 3
	env[i] = map[bool]byte{true: 'B', false: 'A'}[env[i] == 'A']
	if err := os.WriteFile(atts[0], env, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _, code := run(t, nil, "receipt", "audit", rdir, "--trusted-key", pub); code != 5 || !strings.Contains(out, "does not verify") {
		t.Fatalf("audit of a changed attestation: exit %d\n%s", code, out)
	}
}

// waitReleaseObjects polls ns until the release has written an object there
// (a ConfigMap other than the Head and kube-root-ca.crt, a ServiceAccount
// other than default, or a Deployment) and returns how many it saw, or 0
// at the deadline.
func waitReleaseObjects(t *testing.T, ns string, deadline time.Time) int {
	t.Helper()
	cs := cp.Clientset()
	n := 0
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	_ = wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		n = 0
		if l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); err == nil {
			for _, cm := range l.Items {
				if cm.Name != deploy.HeadName && cm.Name != "kube-root-ca.crt" {
					n++
				}
			}
		}
		if l, err := cs.CoreV1().ServiceAccounts(ns).List(ctx, metav1.ListOptions{}); err == nil {
			for _, sa := range l.Items {
				if sa.Name != "default" {
					n++
				}
			}
		}
		if l, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{}); err == nil {
			n += len(l.Items)
		}
		return n > 0, nil
	})
	return n
}
