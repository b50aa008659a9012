package plugin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/worker"
	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
)

// applyRBACList applies a `-o json` List printed by `worker rbac` or
// `package rbac` with the control plane's kubectl, as the admin, as
// printed (each user's binding has a name of its own); drop removes that
// verb from every Role rule.
func applyRBACList(t *testing.T, list, drop string) {
	t.Helper()
	var l struct {
		APIVersion string           `json:"apiVersion"`
		Kind       string           `json:"kind"`
		Items      []map[string]any `json:"items"`
	}
	if err := json.Unmarshal([]byte(list), &l); err != nil || len(l.Items) == 0 {
		t.Fatalf("rbac -o json: %v\n%s", err, list)
	}
	dropped := drop == ""
	for _, it := range l.Items {
		switch it["kind"] {
		case "ClusterRoleBinding":
			name := it["metadata"].(map[string]any)["name"].(string)
			t.Cleanup(func() {
				_ = cp.Clientset().RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
			})
		case "Role":
			if drop == "" {
				continue
			}
			var rules []any
			for _, r := range it["rules"].([]any) {
				rm := r.(map[string]any)
				verbs := slices.DeleteFunc(rm["verbs"].([]any), func(v any) bool { return v == drop })
				if len(verbs) != len(rm["verbs"].([]any)) {
					dropped = true
				}
				if rm["verbs"] = verbs; len(verbs) > 0 {
					rules = append(rules, rm)
				}
			}
			it["rules"] = rules
		}
	}
	if !dropped {
		t.Fatalf("no Role rule grants %q: the test would prove nothing\n%s", drop, list)
	}
	data, _ := json.Marshal(l)
	cp.KubectlApply(t, string(data))
}

// auditedBy is every completed request of user the API server recorded,
// reviews included: proof that the binary ran as user at all.
func auditedBy(t *testing.T, user string) []testcluster.AuditEvent {
	t.Helper()
	data, err := os.ReadFile(cp.AuditLogPath)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := testcluster.ParseAuditLog(data)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(evs, func(e testcluster.AuditEvent) bool {
		return e.Stage != "ResponseComplete" || e.User.Username != user
	})
}

// okWrites are user's successful writes in ns, as "verb resource/name".
func okWrites(t *testing.T, user, ns string) []string {
	t.Helper()
	evs, err := cp.Writes(func(e testcluster.AuditEvent) bool {
		return e.User.Username == user && e.ObjectRef.Namespace == ns && e.ResponseStatus.Code < 300
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.Verb+" "+e.ObjectRef.Resource+"/"+e.ObjectRef.Name)
	}
	return out
}

// Issue #15 through the binary: two `worker publish` processes of
// different deliveries after the same predecessor, each its own user,
// started together: exactly one exits 0, the other 3; the Deployment and
// the Secret hold the winner; the audit log holds the winner's Secret and
// Deployment updates, one each, and no successful write by the loser.
func TestWorkerCLIConcurrentPublish(t *testing.T) {
	ns, stageNS, key, dir := wkSetup(t)
	a := wkDelivery(t, dir, ns, "d-a", "cred-a", "", 1)
	wkRun(t, binary, wkToken("A"), nil, "worker", "stage", "--delivery", a, "--token-file", "-", "--stage-namespace", stageNS)
	if _, stderr, code := wkRun(t, binary, nil, nil, "worker", "publish", "--wait=false", "--delivery", a, "--token-digest-key-file", key, "--stage-namespace", stageNS); code != 0 {
		t.Fatalf("publish d-a: exit %d\n%s", code, stderr)
	}
	type racer struct {
		id, cred, tok, user string
		cmd                 *exec.Cmd
		out, errb           bytes.Buffer
	}
	rs := []*racer{{id: "d-1", cred: "cred-1", tok: "1"}, {id: "d-2", cred: "cred-2", tok: "2"}}
	for _, r := range rs {
		r.user = "wk-publisher-" + r.tok + "-" + ns
		kc, err := cp.Kubeconfig(r.user, "system:masters")
		if err != nil {
			t.Fatal(err)
		}
		f := wkDelivery(t, dir, ns, r.id, r.cred, "cred-a", 2)
		env := []string{"KUBECONFIG=" + kc}
		if _, stderr, code := wkRun(t, binary, wkToken(r.tok), env, "worker", "stage", "--delivery", f, "--token-file", "-", "--stage-namespace", stageNS); code != 0 {
			t.Fatalf("stage %s: exit %d\n%s", r.id, code, stderr)
		}
		r.cmd = exec.Command(binary, "worker", "publish", "--wait=false", "--delivery", f, "--token-digest-key-file", key, "--stage-namespace", stageNS, "-o", "json")
		r.cmd.Stdout, r.cmd.Stderr = &r.out, &r.errb
		r.cmd.Env = append(os.Environ(), env...)
	}
	for _, r := range rs {
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	won, lost := -1, -1
	for i, r := range rs {
		r.cmd.Wait()
		switch code := r.cmd.ProcessState.ExitCode(); {
		case code == 0 && won < 0:
			won = i
		case code == 3 && lost < 0:
			lost = i
		default:
			t.Errorf("publisher %s: exit %d\n%s", r.id, code, r.errb.String())
		}
	}
	if won < 0 || lost < 0 {
		t.Fatalf("want one exit 0 and one exit 3: winner %d, loser %d", won, lost)
	}
	w, l := rs[won], rs[lost]
	var res worker.Result
	if err := json.Unmarshal(w.out.Bytes(), &res); err != nil || res.DeliveryID != w.id || res.DeploymentAction != "updated" {
		t.Fatalf("winner -o json: %v\n%s", err, w.out.String())
	}
	if !strings.Contains(l.errb.String(), "nothing was written") && !strings.Contains(l.errb.String(), "conflict") {
		t.Errorf("the loser does not say it lost:\n%s", l.errb.String())
	}
	ctx := context.Background()
	dep, err := cp.Clientset().AppsV1().Deployments(ns).Get(ctx, "ql3-worker", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ann := dep.Spec.Template.Annotations
	if ann[delivery.AnnotationDeliveryID] != w.id || ann[delivery.AnnotationCredentialID] != w.cred ||
		ann[delivery.AnnotationGeneration] != delivery.GenerationString(2) || ann[delivery.AnnotationPublicationDigest] != res.PublicationDigest {
		t.Fatalf("the Deployment does not carry the winner %s: %v", w.id, ann)
	}
	sec, err := cp.Clientset().CoreV1().Secrets(ns).Get(ctx, delivery.SecretName, metav1.GetOptions{})
	if err != nil || !bytes.Equal(sec.Data[delivery.SecretKey], wkToken(w.tok)) {
		t.Fatalf("the Secret does not hold the winner's token: %v", err)
	}
	got := okWrites(t, w.user, ns)
	slices.Sort(got)
	if want := []string{"update deployments/ql3-worker", "update secrets/" + delivery.SecretName}; !slices.Equal(got, want) {
		t.Fatalf("the winner's audited writes %v, want %v", got, want)
	}
	if got := okWrites(t, l.user, ns); len(got) != 0 {
		t.Fatalf("the loser's audited writes %v, want none", got)
	}
	if len(auditedBy(t, l.user)) == 0 {
		t.Fatal("the audit log holds no request of the loser: its checks prove nothing")
	}
}

// Issue #15 through the binary: the `worker rbac` output applied with
// kubectl lets a user holding only it stage, publish (twice) and discard
// a stage; the API server's audit log shows that user never read (nor
// was refused) ql3-worker-identity, never watched, never patched, and
// updated the Deployment exactly twice.
func TestWorkerCLIRBACAudit(t *testing.T) {
	ns, stageNS, key, dir := wkSetup(t)
	user := "wk-rotator-" + ns
	out, stderr, code := wkRun(t, binary, nil, nil, "worker", "rbac", "-n", ns, "--deployment", "ql3-worker", "--stage-namespace", stageNS, "--bind-user", user, "-o", "json")
	if code != 0 {
		t.Fatalf("worker rbac: exit %d\n%s", code, stderr)
	}
	applyRBACList(t, out, "")
	kc, err := cp.Kubeconfig(user)
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"KUBECONFIG=" + kc}
	for gen, s := range []struct{ id, cred, pred, tok string }{{"d-a", "cred-a", "", "A"}, {"d-b", "cred-b", "cred-a", "B"}} {
		f := wkDelivery(t, dir, ns, s.id, s.cred, s.pred, gen+1)
		if _, stderr, code := wkRun(t, binary, wkToken(s.tok), env, "worker", "stage", "--delivery", f, "--token-file", "-", "--stage-namespace", stageNS); code != 0 {
			t.Fatalf("stage %s as the rbac user: exit %d\n%s", s.id, code, stderr)
		}
		if _, stderr, code := wkRun(t, binary, nil, env, "worker", "publish", "--wait=false", "--delivery", f, "--token-digest-key-file", key, "--stage-namespace", stageNS); code != 0 {
			t.Fatalf("publish %s as the rbac user: exit %d\n%s", s.id, code, stderr)
		}
	}
	if out, stderr, code := wkRun(t, binary, nil, env, "worker", "discard-stage", "-n", ns, "--delivery-id", "d-a", "--deployment", "ql3-worker", "--stage-namespace", stageNS); code != 0 {
		t.Fatalf("discard-stage as the rbac user: exit %d\n%s%s", code, out, stderr)
	}
	reads, err := cp.Reads(func(e testcluster.AuditEvent) bool {
		return e.User.Username == user && (e.ObjectRef.Name == delivery.IdentitySecret || e.Verb == "watch")
	})
	if err != nil || len(reads) != 0 {
		t.Fatalf("audit log: the rbac user read the identity Secret or watched: %+v %v", reads, err)
	}
	// Not vacuous: the same log holds the user's reads of the Deployment
	// and of the credential Secret in the Worker namespace.
	byName := map[string]int{}
	all, err := cp.Reads(func(e testcluster.AuditEvent) bool { return e.User.Username == user && e.ObjectRef.Namespace == ns })
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range all {
		byName[e.ObjectRef.Resource+"/"+e.ObjectRef.Name]++
	}
	if byName["deployments/ql3-worker"] == 0 || byName["secrets/"+delivery.SecretName] == 0 {
		t.Fatalf("audit log: reads of the rbac user in %s: %v; the check above proves nothing", ns, byName)
	}
	deps := 0
	for _, w := range okWrites(t, user, ns) {
		if strings.HasPrefix(w, "patch") || strings.Contains(w, delivery.IdentitySecret) {
			t.Fatalf("the rbac user wrote %s", w)
		}
		if w == "update deployments/ql3-worker" {
			deps++
		}
	}
	if deps != 2 {
		t.Fatalf("the rbac user updated the Deployment %d times, want 2", deps)
	}
	// And RBAC itself refuses it the identity Secret (after the checks
	// above: this probe is a read the audit log records).
	cmd := exec.Command(filepath.Join(cp.BinDir, "kubectl"), "get", "secret", delivery.IdentitySecret, "-n", ns)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kc)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "forbidden") {
		t.Fatalf("the rbac user can read the identity Secret: %v\n%s", err, out)
	}
}
