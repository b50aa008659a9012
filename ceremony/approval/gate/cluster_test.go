package gate_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate/gatetest"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
)

// The approval policy is proven here against a real kube-apiserver: every
// rule, as the users it names.
var cp *testcluster.ControlPlane

func TestMain(m *testing.M) { testcluster.Main(m, testcluster.Options{}, &cp) }

var digestA = "sha256:" + strings.Repeat("a", 64)

func pending(proposer string) record.Approval {
	return record.Approval{PreflightDigest: digestA, CommandDigest: digestA, ExpectedHead: "ql3h1-0-none", Proposer: proposer, Decision: record.Pending}
}

// editor grants user get, create, update, patch and delete on ConfigMaps
// in ns: more than any printed role, so that only the policy refuses.
func editor(t *testing.T, ns, user string) kubernetes.Interface {
	t.Helper()
	name := "edit-" + strings.NewReplacer(":", "-").Replace(user)
	cp.GrantAll(t, []any{&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "create", "update", "patch", "delete"}, APIGroups: []string{""}, Resources: []string{"configmaps"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}})
	cs, err := kubernetes.NewForConfig(cp.User(t, user))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// installPolicy applies the printed policy as the admin (a cluster admin
// runs `kubectl ql3 approval policy | kubectl apply -f -`) and waits until
// the API server enforces it.
func installPolicy(t *testing.T) { gatetest.Install(t, cp.Clientset(), cp.Namespace(t)) }

// TestPolicyRules sends each request the policy must allow or deny, as the
// user it concerns, and checks the exact outcome (allowed, or denied
// quoting the rule's message).
func TestPolicyRules(t *testing.T) {
	installPolicy(t)
	ns := cp.Namespace(t)
	alice, bob := editor(t, ns, "alice"), editor(t, ns, "bob")
	sa := editor(t, ns, "system:serviceaccount:"+ns+":robot")
	ctx := context.Background()
	create := func(cs kubernetes.Interface, cm *corev1.ConfigMap) error {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	mutate := func(a record.Approval, f func(cm *corev1.ConfigMap)) *corev1.ConfigMap {
		cm := gate.ConfigMap(ns, a)
		f(cm)
		return cm
	}
	creates := []struct {
		name string
		cs   kubernetes.Interface
		cm   *corev1.ConfigMap
		want string // "" allowed, else the denial's message
	}{
		{"own pending proposal", alice, gate.ConfigMap(ns, pending("alice")), ""},
		{"proposal in another's name", alice, gate.ConfigMap(ns, pending("bob")), gate.MsgCreate},
		{"created approved", alice, gate.ConfigMap(ns, pending("alice").Decided(record.Approved, "bob", "")), gate.MsgCreate},
		{"created with a reason", alice, mutate(pending("alice"), func(cm *corev1.ConfigMap) { cm.Data["reason"] = "x" }), gate.MsgCreate},
		{"an extra key", alice, mutate(pending("alice"), func(cm *corev1.ConfigMap) { cm.Data["extra"] = "" }), gate.MsgShape},
		{"a missing key", alice, mutate(pending("alice"), func(cm *corev1.ConfigMap) { delete(cm.Data, "approver") }), gate.MsgShape},
		{"no data at all", alice, mutate(pending("alice"), func(cm *corev1.ConfigMap) { cm.Data = nil }), gate.MsgShape},
		{"no labels", alice, mutate(pending("alice"), func(cm *corev1.ConfigMap) { cm.Labels = nil }), gate.MsgShape},
		{"a third label", alice, mutate(pending("alice"), func(cm *corev1.ConfigMap) { cm.Labels["x"] = "y" }), gate.MsgShape},
		{"binaryData", alice, mutate(pending("alice"), func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"b": {1}} }), gate.MsgShape},
		{"immutable", alice, mutate(pending("alice"), func(cm *corev1.ConfigMap) { cm.Immutable = new(bool); *cm.Immutable = true }), gate.MsgShape},
		{"another schema", alice, mutate(pending("alice"), func(cm *corev1.ConfigMap) { cm.Data["schema"] = "v2" }), gate.MsgShape},
		{"another ConfigMap's name is not matched", alice, mutate(pending("bob"), func(cm *corev1.ConfigMap) { cm.Name = "other" }), ""},
	}
	for _, c := range creates {
		t.Run("create/"+c.name, func(t *testing.T) { expect(t, create(c.cs, c.cm), c.want) })
	}
	if _, err := alice.CoreV1().ConfigMaps(ns).Create(ctx, gate.ConfigMap(ns, pending("alice")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	update := func(cs kubernetes.Interface, f func(cm *corev1.ConfigMap)) error {
		cur, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, record.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		f(cur)
		_, err = cs.CoreV1().ConfigMaps(ns).Update(ctx, cur, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	decide := func(d, approver string) func(cm *corev1.ConfigMap) {
		return func(cm *corev1.ConfigMap) { cm.Data["decision"], cm.Data["approver"] = d, approver }
	}
	both := func(fs ...func(cm *corev1.ConfigMap)) func(cm *corev1.ConfigMap) {
		return func(cm *corev1.ConfigMap) {
			for _, f := range fs {
				f(cm)
			}
		}
	}
	updates := []struct {
		name string
		cs   kubernetes.Interface
		f    func(cm *corev1.ConfigMap)
		want string
	}{
		{"self-approval", alice, decide(record.Approved, "alice"), gate.MsgUpdate},
		{"approval in another's name", bob, decide(record.Approved, "carol"), gate.MsgUpdate},
		{"approval by a ServiceAccount", sa, decide(record.Approved, "system:serviceaccount:"+ns+":robot"), gate.MsgUpdate},
		{"approval that changes the digest", bob, both(decide(record.Approved, "bob"), func(cm *corev1.ConfigMap) { cm.Data["preflightDigest"] = "sha256:" + strings.Repeat("b", 64) }), gate.MsgUpdate},
		{"approval that changes the proposer", bob, both(decide(record.Approved, "bob"), func(cm *corev1.ConfigMap) { cm.Data["proposer"] = "mallory" }), gate.MsgUpdate},
		{"approval that changes a label", bob, both(decide(record.Approved, "bob"), func(cm *corev1.ConfigMap) { cm.Labels["qinglong.io/approval-schema"] = "x" }), gate.MsgShape},
		{"an update that decides nothing", bob, func(cm *corev1.ConfigMap) { cm.Annotations = map[string]string{"a": "b"} }, gate.MsgUpdate},
		{"a decision other than approved or rejected", bob, decide("maybe", "bob"), gate.MsgUpdate},
		{"a rejection with a reason", bob, both(decide(record.Rejected, "bob"), func(cm *corev1.ConfigMap) { cm.Data["reason"] = "no" }), ""},
		{"a control character in the reason", bob, both(decide(record.Rejected, "bob"), func(cm *corev1.ConfigMap) { cm.Data["reason"] = "a\nb" }), gate.MsgShape},
		{"a second person's approval", bob, decide(record.Approved, "bob"), ""},
	}
	for _, c := range updates {
		t.Run("update/"+c.name, func(t *testing.T) { expect(t, update(c.cs, c.f), c.want) })
	}
	if err := update(bob, decide(record.Approved, "bob")); err != nil {
		t.Fatal(err)
	}
	// The dry-runs above stored nothing; now bob approves for real.
	cur, _ := bob.CoreV1().ConfigMaps(ns).Get(ctx, record.Name, metav1.GetOptions{})
	decide(record.Approved, "bob")(cur)
	if _, err := bob.CoreV1().ConfigMaps(ns).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	carol := editor(t, ns, "carol")
	t.Run("update/a decided approval never changes", func(t *testing.T) {
		expect(t, update(carol, decide(record.Rejected, "carol")), gate.MsgUpdate)
	})
}

func expect(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("refused: %v, want allowed", err)
	case want != "" && !gate.IsDenial(err, want):
		t.Fatalf("got %v, want the policy's denial %q", err, want)
	case want != "" && !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err):
		t.Fatalf("denial %v is neither 403 nor 422", err)
	}
}

// The gate refuses unless the API server enforces exactly the printed
// policy: a binding that only audits, a deleted binding, an altered
// policy, no policy at all. Each refusal says how to install it; the
// reinstalled policy passes again.
func TestVerifyPolicyRefuses(t *testing.T) {
	installPolicy(t)
	ctx := context.Background()
	adm := cp.Clientset().AdmissionregistrationV1()
	ns := cp.Namespace(t)
	exec := cp.Clientset() // the policy's reader: the admin, so that only the policy decides
	refused := func(t *testing.T, want string) {
		t.Helper()
		_, err := gate.VerifyPolicy(ctx, exec, ns)
		if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), gate.InstallHint) {
			t.Fatalf("VerifyPolicy: %v, want invalid saying %q and how to install", err, want)
		}
	}
	cases := []struct {
		name    string
		breakIt func(t *testing.T)
		want    string
	}{
		{"binding audits only", func(t *testing.T) {
			b, _ := adm.ValidatingAdmissionPolicyBindings().Get(ctx, gate.PolicyName, metav1.GetOptions{})
			b.Spec.ValidationActions = []admissionv1.ValidationAction{admissionv1.Audit}
			if _, err := adm.ValidatingAdmissionPolicyBindings().Update(ctx, b, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, "ValidatingAdmissionPolicyBinding " + gate.PolicyName + " differs"},
		{"binding deleted", func(t *testing.T) {
			if err := adm.ValidatingAdmissionPolicyBindings().Delete(ctx, gate.PolicyName, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, "ValidatingAdmissionPolicyBinding " + gate.PolicyName + " is absent"},
		{"policy altered", func(t *testing.T) {
			p, _ := adm.ValidatingAdmissionPolicies().Get(ctx, gate.PolicyName, metav1.GetOptions{})
			p.Spec.Validations = p.Spec.Validations[:1]
			if _, err := adm.ValidatingAdmissionPolicies().Update(ctx, p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, "ValidatingAdmissionPolicy " + gate.PolicyName + " differs"},
		{"no policy", func(t *testing.T) {
			if err := adm.ValidatingAdmissionPolicies().Delete(ctx, gate.PolicyName, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, "ValidatingAdmissionPolicy " + gate.PolicyName + " is absent"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gatetest.Put(t, cp.Clientset())
			c.breakIt(t)
			refused(t, c.want)
		})
	}
	installPolicy(t)
	if _, err := gate.VerifyPolicy(ctx, exec, ns); err != nil {
		t.Fatalf("reinstalled: %v", err)
	}
}

// The probes prove enforcement, not presence: with the policy matching
// another name, the same forged approvals are accepted (dry-run) — so a
// probe that was denied was denied by the policy as printed. (The gate
// refuses this policy already by its spec.)
func TestVerifyPolicyProbes(t *testing.T) {
	installPolicy(t)
	ctx := context.Background()
	ns := cp.Namespace(t)
	exec := editor(t, ns, "executor")
	adm := cp.Clientset().AdmissionregistrationV1()
	p, _ := adm.ValidatingAdmissionPolicies().Get(ctx, gate.PolicyName, metav1.GetOptions{})
	p.Spec.MatchConditions[0].Expression = "object.metadata.name == 'something-else'"
	if _, err := adm.ValidatingAdmissionPolicies().Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { installPolicy(t) })
	// The spec differs, so the comparison refuses first; the probes are
	// proven on their own below by sending them while the policy is off.
	if _, err := gate.VerifyPolicy(ctx, exec, ns); !fail.Is(err, fail.Invalid) {
		t.Fatalf("VerifyPolicy: %v", err)
	}
	// The API server sees the policy change a moment later: poll with a deadline.
	for _, pr := range gate.Probes("executor") {
		var last error
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, last = exec.CoreV1().ConfigMaps(ns).Create(ctx, gate.ConfigMap(ns, pr.Approval), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return last == nil, nil
		})
		if err != nil {
			t.Fatalf("probe %s with the policy matching another name: %v, want accepted", pr.Name, last)
		}
	}
}

// TestPolicyReasonVectors holds the policy to the reason rule of
// docs/approval.md §1 that every reader applies (record.CheckReason): each
// reason vector of testdata/vectors/approval, sent as bob's rejection
// (dry-run), is allowed exactly when the vector is accepted — one rule on
// both sides, bytes and control characters alike.
func TestPolicyReasonVectors(t *testing.T) {
	installPolicy(t)
	ns := cp.Namespace(t)
	alice, bob := editor(t, ns, "alice"), editor(t, ns, "bob")
	ctx := context.Background()
	if _, err := alice.CoreV1().ConfigMaps(ns).Create(ctx, gate.ConfigMap(ns, pending("alice")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("..", "..", "..", "testdata", "vectors", "approval")
	var set struct {
		Vectors []struct{ Name, Input, Verdict string } `json:"vectors"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &set); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range set.Vectors {
		if !strings.HasPrefix(v.Name, "reason-") && v.Name != "rejected-longest-reason" && v.Name != "approved-no-reason" {
			continue // the reason rule's vectors (pending-reason is the create rule's)
		}
		n++
		t.Run(v.Name, func(t *testing.T) {
			var vec struct {
				Data map[string]string `json:"data"`
			}
			b, err := os.ReadFile(filepath.Join(dir, v.Input))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &vec); err != nil {
				t.Fatal(err)
			}
			cur, err := bob.CoreV1().ConfigMaps(ns).Get(ctx, record.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cur.Data["decision"], cur.Data["approver"], cur.Data["reason"] = record.Rejected, "bob", vec.Data["reason"]
			_, err = bob.CoreV1().ConfigMaps(ns).Update(ctx, cur, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
			want := ""
			if v.Verdict != "accept" {
				want = gate.MsgShape
			}
			expect(t, err, want)
		})
	}
	if n < 6 {
		t.Fatalf("%d reason vectors, want at least 6", n)
	}
}
