package gate_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
)

// flatHead is a Head ConfigMap as the Head policy sees it: the label and
// the flat keys (the policy never reads head.json).
func flatHead(ns string, gen, phase, preflight, rule, uid, proposer, approver string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: gate.HeadName, Namespace: ns, Labels: map[string]string{gate.HeadApprovalLabel: gate.HeadApprovalLabelValue}},
		Data: map[string]string{"head.json": "{}", gate.HeadKeyPhase: phase, gate.HeadKeyGeneration: gen, gate.HeadKeyPreflightDigest: preflight,
			gate.HeadKeyCommandDigest: digestA, gate.HeadKeyApprovalPolicy: rule, gate.HeadKeyApprovalUID: uid,
			gate.HeadKeyApprovalProposer: proposer, gate.HeadKeyApprovalApprover: approver},
	}
}

// approved creates ns's approval object for preflight digestA as alice
// and approves it as bob, through the approval policy; it returns its UID.
func approved(t *testing.T, ns string, alice, bob kubernetes.Interface) string {
	t.Helper()
	ctx := context.Background()
	if _, err := alice.CoreV1().ConfigMaps(ns).Create(ctx, gate.ConfigMap(ns, pending("alice")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cur, err := bob.CoreV1().ConfigMaps(ns).Get(ctx, record.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Data["decision"], cur.Data["approver"] = record.Approved, "bob"
	if cur, err = bob.CoreV1().ConfigMaps(ns).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return string(cur.UID)
}

// TestHeadPolicyRules sends each Head write the Head policy must allow or
// deny, as a user who may write any ConfigMap of the namespace (more than
// the printed deployer role), so that only the policy decides.
func TestHeadPolicyRules(t *testing.T) {
	installPolicy(t)
	ns := cp.Namespace(t)
	alice, bob, dep := editor(t, ns, "alice"), editor(t, ns, "bob"), editor(t, ns, "deployer")
	uid := approved(t, ns, alice, bob)
	digestB := "sha256:" + strings.Repeat("b", 64)
	ctx := context.Background()
	heads := dep.CoreV1().ConfigMaps(ns)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	head := func(f func(cm *corev1.ConfigMap)) *corev1.ConfigMap {
		cm := flatHead(ns, "1", "applying", digestA, "two-person", uid, "alice", "bob")
		f(cm)
		return cm
	}
	same := func(*corev1.ConfigMap) {}
	creates := []struct {
		name string
		cm   *corev1.ConfigMap
		want string
	}{
		{"an install under the rule, as approved", head(same), ""},
		{"an approval uid that is no object's", head(func(cm *corev1.ConfigMap) { cm.Data[gate.HeadKeyApprovalUID] = "made-up" }), gate.MsgHeadParams},
		{"another approver", head(func(cm *corev1.ConfigMap) { cm.Data[gate.HeadKeyApprovalApprover] = "carol" }), gate.MsgHeadParams},
		{"another proposer", head(func(cm *corev1.ConfigMap) { cm.Data[gate.HeadKeyApprovalProposer] = "mallory" }), gate.MsgHeadParams},
		{"another preflight", head(func(cm *corev1.ConfigMap) { cm.Data[gate.HeadKeyPreflightDigest] = digestB }), gate.MsgHeadParams},
		{"another command", head(func(cm *corev1.ConfigMap) { cm.Data[gate.HeadKeyCommandDigest] = digestB }), gate.MsgHeadParams},
		{"approved by its proposer", head(func(cm *corev1.ConfigMap) { cm.Data[gate.HeadKeyApprovalApprover] = "alice" }), gate.MsgHeadClaim},
		{"the rule on and no approval named", head(func(cm *corev1.ConfigMap) { cm.Data[gate.HeadKeyApprovalUID] = "" }), gate.MsgHeadClaim},
		{"a flat key missing", head(func(cm *corev1.ConfigMap) { delete(cm.Data, gate.HeadKeyGeneration) }), gate.MsgHeadClaim},
		{"no rule and no approval: not the policy's", head(func(cm *corev1.ConfigMap) {
			cm.Data[gate.HeadKeyApprovalPolicy], cm.Data[gate.HeadKeyApprovalUID] = "", ""
		}), ""},
		{"without the label: not matched (readers call it tamper)", head(func(cm *corev1.ConfigMap) {
			cm.Labels = nil
			cm.Data[gate.HeadKeyApprovalUID] = "made-up"
		}), ""},
	}
	for _, c := range creates {
		t.Run("create/"+c.name, func(t *testing.T) {
			_, err := heads.Create(ctx, c.cm, dry)
			expectHead(t, err, c.want)
		})
	}
	if _, err := heads.Create(ctx, head(same), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	updates := []struct {
		name string
		cm   *corev1.ConfigMap
		want string
	}{
		{"the commit of the same move", head(func(cm *corev1.ConfigMap) { cm.Data[gate.HeadKeyPhase] = "committed" }), ""},
		{"a new generation reusing the approval", head(func(cm *corev1.ConfigMap) { cm.Data[gate.HeadKeyGeneration] = "2" }), gate.MsgHeadClaim},
		{"the rule and the approval dropped", head(func(cm *corev1.ConfigMap) {
			cm.Data = map[string]string{"head.json": "{}"}
			cm.Labels = nil
		}), gate.MsgHeadClaim},
		{"the rule turned off within the move", head(func(cm *corev1.ConfigMap) { cm.Data[gate.HeadKeyApprovalPolicy] = "" }), gate.MsgHeadClaim},
		{"a made-up approval for a new generation", head(func(cm *corev1.ConfigMap) {
			cm.Data[gate.HeadKeyGeneration], cm.Data[gate.HeadKeyApprovalUID] = "2", "made-up"
		}), gate.MsgHeadParams},
	}
	for _, c := range updates {
		t.Run("update/"+c.name, func(t *testing.T) {
			cur, err := heads.Get(ctx, gate.HeadName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			c.cm.ResourceVersion = cur.ResourceVersion
			_, err = heads.Update(ctx, c.cm, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
			expectHead(t, err, c.want)
		})
	}
	t.Run("delete", func(t *testing.T) {
		err := heads.Delete(ctx, gate.HeadName, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		expectHead(t, err, gate.MsgHeadDelete)
	})
	t.Run("the approval object deleted: every write of the Head is denied", func(t *testing.T) {
		if err := alice.CoreV1().ConfigMaps(ns).Delete(ctx, record.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		cm := head(func(cm *corev1.ConfigMap) { cm.Data[gate.HeadKeyPhase] = "committed" })
		cur, _ := heads.Get(ctx, gate.HeadName, metav1.GetOptions{})
		cm.ResourceVersion = cur.ResourceVersion
		_, err := heads.Update(ctx, cm, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil || !strings.Contains(err.Error(), gate.HeadPolicyName) || !strings.Contains(err.Error(), "no params found") {
			t.Fatalf("commit with the approval object gone: %v, want the Head policy's denial for its missing parameter", err)
		}
	})
}

func expectHead(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("refused: %v, want allowed", err)
	case want != "" && !gate.IsHeadDenial(err, want):
		t.Fatalf("got %v, want the Head policy's denial %q", err, want)
	}
}
