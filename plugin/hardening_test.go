package plugin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/faults"
)

// headWrite matches a write of the Head in phase (JSON escapes head.json
// inside the ConfigMap; protobuf carries it raw).
func headWrite(ns, method, phase string) faults.Match {
	return func(r *http.Request, body []byte) bool {
		if r.Method != method || !strings.Contains(r.URL.Path, "/namespaces/"+ns+"/configmaps") {
			return false
		}
		return bytes.Contains(body, []byte(`\"phase\":\"`+phase+`\"`)) || bytes.Contains(body, []byte(`"phase":"`+phase+`"`))
	}
}

// proxied starts a loopback proxy to the test API server (as the admin)
// through wrap, and returns the environment that points the binary at it.
func proxied(t *testing.T, ns string, wrap func(http.RoundTripper) http.RoundTripper) []string {
	t.Helper()
	p, err := faults.NewProxy(cp.RESTConfig(), wrap)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	kc := filepath.Join(t.TempDir(), "proxy.kubeconfig")
	if err := p.Kubeconfig(kc, ns); err != nil {
		t.Fatal(err)
	}
	return []string{"KUBECONFIG=" + kc}
}

// A write whose answer is held past --request-timeout reached the server
// (the proxy forwards it and holds only the answer): at every mutation
// point the built binary settles it by re-reading — never "nothing was
// written" — and finishes: exit 0, the generation committed, so that a
// rerun is a replay.
func TestRequestTimeoutAtEveryMutationPoint(t *testing.T) {
	const landed, reapplied = "the write had landed (exact replay of our intent)", "applying again (server-side apply is idempotent)"
	points := []struct {
		name    string
		upgrade bool
		match   func(ns string) faults.Match
		settled string // how stderr says the held write was settled
	}{
		{"head create", false, func(ns string) faults.Match { return headWrite(ns, http.MethodPost, "applying") }, landed},
		{"head acquire", true, func(ns string) faults.Match { return headWrite(ns, http.MethodPut, "applying") }, landed},
		{"object apply", false, func(ns string) faults.Match { return faults.Write(http.MethodPatch, "/namespaces/"+ns+"/deployments/") }, reapplied},
		{"head commit", true, func(ns string) faults.Match { return headWrite(ns, http.MethodPut, "committed") }, landed},
	}
	for _, pt := range points {
		t.Run(pt.name, func(t *testing.T) {
			ns := controlNamespace(t)
			work := t.TempDir()
			rdir := filepath.Join(work, "receipts")
			dir, kind, gen := releaseCopy(t, "v3.0.0", ns, ""), "install", int64(1)
			if pt.upgrade {
				pf0 := filepath.Join(work, "install.json")
				mustRun(t, nil, "preflight", dir, "--transition", "install", "--expected-head", headToken(t, nil, ns), "--out", pf0)
				mustRun(t, nil, "apply", "--preflight", pf0, "--receipts-dir", rdir)
				dir, kind, gen = releaseCopy(t, "v3.1.0", ns, ""), "upgrade", 2
			}
			pf := filepath.Join(work, "pf.json")
			mustRun(t, nil, "preflight", dir, "--transition", kind, "--expected-head", headToken(t, nil, ns), "--out", pf)

			f := faults.NewDelay(pt.match(ns), 4*time.Second)
			env := proxied(t, ns, f.Wrap)
			out, stderr, code := run(t, env, "apply", "--preflight", pf, "--receipts-dir", rdir, "--request-timeout", "1s")
			if f.Fired() != 1 {
				t.Fatalf("the delay fired %d times: the test exercised nothing\n%s", f.Fired(), stderr)
			}
			if code != 0 {
				t.Fatalf("apply with an answer held past --request-timeout: exit %d, want 0 (the write landed; settled by reading)\n%s\n%s", code, out, stderr)
			}
			if !strings.Contains(stderr, "did not arrive") || !strings.Contains(stderr, pt.settled) {
				t.Errorf("stderr does not say the answer did not arrive and %q:\n%s", pt.settled, stderr)
			}
			if strings.Contains(stderr, "nothing was written") {
				t.Errorf("a write that reached the server was called not written:\n%s", stderr)
			}
			if h := headOf(t, ns); h.Phase != deploy.PhaseCommitted || h.Generation != gen {
				t.Fatalf("after apply: generation %d %s, want %d committed", h.Generation, h.Phase, gen)
			}
			if out := mustRun(t, nil, "apply", "--preflight", pf, "--receipts-dir", rdir); !strings.Contains(out, "replayed") {
				t.Fatalf("rerun: %s", out)
			}
		})
	}
}

func headOf(t *testing.T, ns string) *deploy.Head {
	t.Helper()
	cl, err := deploy.NewKubeCluster(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	h, err := deploy.ReadHead(context.Background(), cl, ns)
	if err != nil || h == nil {
		t.Fatalf("read head: %v %v", h, err)
	}
	return h
}

// The Head deleted between acquire and commit: the commit's update answers
// 404, which is conflict (exit 3) "the Head was removed", not unavailable.
func TestHeadRemovedBeforeCommit(t *testing.T) {
	ns := controlNamespace(t)
	dir := releaseCopy(t, "v3.0.0", ns, "")
	pf := filepath.Join(t.TempDir(), "pf.json")
	mustRun(t, nil, "preflight", dir, "--transition", "install", "--expected-head", headToken(t, nil, ns), "--out", pf)
	match := headWrite(ns, http.MethodPut, "committed")
	deleted := false
	env := proxied(t, ns, func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if !deleted && r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/configmaps/"+deploy.HeadName) {
				body := readBody(t, r)
				if match(r, body) {
					deleted = true
					if err := cp.Clientset().CoreV1().ConfigMaps(ns).Delete(r.Context(), deploy.HeadName, metav1.DeleteOptions{}); err != nil {
						t.Errorf("delete head: %v", err)
					}
				}
			}
			return next.RoundTrip(r)
		})
	})
	_, stderr, code := run(t, env, "apply", "--preflight", pf, "--receipts-dir", t.TempDir())
	if !deleted || code != 3 || !strings.Contains(stderr, "the Head was removed") {
		t.Fatalf("commit onto a removed Head: deleted %v, exit %d, want 3 naming the removal\n%s", deleted, code, stderr)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func readBody(t *testing.T, r *http.Request) []byte {
	t.Helper()
	if r.Body == nil {
		return nil
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r.Body); err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	data := buf.Bytes()
	r.Body = readCloser{bytes.NewReader(data)}
	r.ContentLength = int64(len(data))
	return data
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// A write an admission policy denies is invalid input (exit 2) naming the
// object and the server's message — never "unavailable, rerunning is
// safe". The ValidatingAdmissionPolicy is created after the preflight, so
// that apply meets it.
func TestAdmissionDenialIsInvalid(t *testing.T) {
	ns := controlNamespace(t)
	dir := releaseCopy(t, "v3.0.0", ns, "")
	pf := filepath.Join(t.TempDir(), "pf.json")
	mustRun(t, nil, "preflight", dir, "--transition", "install", "--expected-head", headToken(t, nil, ns), "--out", pf)

	ctx := context.Background()
	adm := cp.Clientset().AdmissionregistrationV1()
	name := "deny-ql3-config-" + ns
	fail := admissionregistrationv1.Fail
	pol := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "object.metadata.name != 'ql3-config'", Message: "ql3-config is frozen by policy"}},
		},
	}
	if _, err := adm.ValidatingAdmissionPolicies().Create(ctx, pol, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{}) })
	bind := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns},
			}},
		},
	}
	if _, err := adm.ValidatingAdmissionPolicyBindings().Create(ctx, bind, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{}) })
	// Wait until the policy is in force (it is loaded asynchronously).
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ql3-config", Namespace: ns}}
	inForce := func(ctx context.Context) (bool, error) {
		_, err := cp.Clientset().CoreV1().ConfigMaps(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err), nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, inForce); err != nil {
		t.Fatalf("the policy never came into force: %v", err)
	}

	_, stderr, code := run(t, nil, "apply", "--preflight", pf, "--receipts-dir", t.TempDir())
	if code != 2 || !strings.Contains(stderr, "ql3-config") || !strings.Contains(stderr, "ql3-config is frozen by policy") {
		t.Fatalf("apply denied by admission: exit %d, want 2 naming the object and the policy's message\n%s", code, stderr)
	}
	if strings.Contains(stderr, "rerunning is safe") {
		t.Errorf("an admission denial was called retryable:\n%s", stderr)
	}
}

// A replay whose preflight the Head has moved past is superseded: exit 3,
// -o json outcome "superseded"; a replay at the current generation stays 0.
func TestSupersededReplay(t *testing.T) {
	ns := controlNamespace(t)
	work := t.TempDir()
	rdir := filepath.Join(work, "receipts")
	v300, v310 := releaseCopy(t, "v3.0.0", ns, ""), releaseCopy(t, "v3.1.0", ns, "")
	pf1, pf2 := filepath.Join(work, "1.json"), filepath.Join(work, "2.json")
	mustRun(t, nil, "preflight", v300, "--transition", "install", "--expected-head", headToken(t, nil, ns), "--out", pf1)
	mustRun(t, nil, "apply", "--preflight", pf1, "--receipts-dir", rdir)
	if _, stderr, code := run(t, nil, "apply", "--preflight", pf1, "--receipts-dir", rdir); code != 0 {
		t.Fatalf("replay at the current generation: exit %d\n%s", code, stderr)
	}
	mustRun(t, nil, "preflight", v310, "--transition", "upgrade", "--expected-head", headToken(t, nil, ns), "--out", pf2)
	mustRun(t, nil, "apply", "--preflight", pf2, "--receipts-dir", rdir)

	out, stderr, code := run(t, nil, "apply", "--preflight", pf1, "--receipts-dir", rdir, "-o", "json")
	var res deploy.ApplyResult
	if code != 3 || !strings.Contains(stderr, "superseded: this preflight was committed as generation 1") || !strings.Contains(stderr, "generation 2") {
		t.Fatalf("superseded replay: exit %d, want 3\n%s", code, stderr)
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Outcome != "superseded" || res.Generation != 1 {
		t.Fatalf("-o json: %+v %v\n%s", res, err, out)
	}
}
