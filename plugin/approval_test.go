package plugin_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/approval"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate/gatetest"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
)

// kubectlAs runs the control plane's kubectl with kubeconfig, stdin in.
func kubectlAs(t *testing.T, kubeconfig, in string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(cp.BinDir, "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdin = strings.NewReader(in)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// userEnv is the environment of the built plugin run as user: its own
// kubeconfig (a client certificate the API server authenticates).
func userEnv(t *testing.T, user string) (string, []string) {
	t.Helper()
	kc, err := cp.Kubeconfig(user)
	if err != nil {
		t.Fatal(err)
	}
	return kc, []string{"KUBECONFIG=" + kc}
}

// installApprovalPolicy applies `kubectl ql3 approval policy` with the
// admin's kubectl, as a cluster admin does, and waits (polling with a
// deadline) until the API server enforces it.
func installApprovalPolicy(t *testing.T) {
	t.Helper()
	policy := mustRun(t, nil, "approval", "policy")
	if out, err := kubectlAs(t, cp.AdminKubeconfig, policy, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply the policy: %v\n%s", err, out)
	}
	gatetest.WaitEnforced(t, cp.Clientset(), controlNamespace(t))
}

// The two-person rule through the built binary, each person with their
// own kubeconfig and exactly the printed roles: alice proposes, cannot
// approve her own proposal (the tool says so; a hand-made kubectl replace
// is denied by the API server), cannot forge an approval with kubectl, and
// bob approves; a second record is proposed and rejected.
func TestCLIApproval(t *testing.T) {
	installApprovalPolicy(t)
	ns := controlNamespace(t)
	pf := filepath.Join(t.TempDir(), "pf.json")
	mustRun(t, nil, "preflight", releaseCopy(t, "v3.0.0", ns, ""), "--transition", "install", "--expected-head", deploy.AbsentToken, "--out", pf)
	aliceKC, alice := userEnv(t, "alice")
	_, bob := userEnv(t, "bob")
	piaKC, _ := userEnv(t, "pia") // exactly the printed proposer role, nothing else
	for _, g := range [][2]string{{approval.RoleProposer, "alice"}, {approval.RoleApprover, "alice"}, {approval.RoleApprover, "bob"}, {approval.RoleProposer, "pia"}} {
		rbac := mustRun(t, nil, "rbac", "--role", g[0], "-n", ns, "--bind-user", g[1])
		if out, err := kubectlAs(t, cp.AdminKubeconfig, rbac, "apply", "-f", "-"); err != nil {
			t.Fatalf("apply %s role: %v\n%s", g[0], err, out)
		}
	}

	out, stderr, code := run(t, alice, "propose", "--preflight", pf)
	if code != 0 || !strings.Contains(out, "proposed: "+ns+"/"+record.Name) || !strings.Contains(stderr, "propose: install 3.0.0 in namespace "+ns) {
		t.Fatalf("propose: exit %d\n%s\n%s", code, out, stderr)
	}
	if out, _, code := run(t, alice, "propose", "--preflight", pf); code != 0 || !strings.Contains(out, "replayed") {
		t.Fatalf("propose again: exit %d: %s", code, out)
	}
	if _, stderr, code := run(t, alice, "approve", "--preflight", pf); code != 2 || !strings.Contains(stderr, "you (alice) proposed this preflight") {
		t.Fatalf("self-approval through the tool: exit %d: %s", code, stderr)
	}
	// By hand: alice rewrites the object as approved by herself.
	cur, err := kubectlAs(t, aliceKC, "", "get", "configmap", record.Name, "-n", ns, "-o", "json")
	if err != nil {
		t.Fatalf("%v: %s", err, cur)
	}
	self := strings.Replace(strings.Replace(cur, `"decision": "pending"`, `"decision": "approved"`, 1), `"approver": ""`, `"approver": "alice"`, 1)
	if out, err := kubectlAs(t, aliceKC, self, "replace", "-f", "-"); err == nil || !strings.Contains(out, gate.DenialPrefix+gate.MsgUpdate) {
		t.Fatalf("self-approval by kubectl replace: %v\n%s", err, out)
	}
	// A forgery by a proposer (alice, and pia, who holds exactly the
	// printed proposer role): a new object in bob's name (after deleting
	// alice's), or created approved.
	if out, err := kubectlAs(t, aliceKC, "", "delete", "configmap", record.Name, "-n", ns); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, forged := range []string{
		strings.Replace(cur, `"proposer": "alice"`, `"proposer": "bob"`, 1),
		strings.Replace(strings.Replace(cur, `"decision": "pending"`, `"decision": "approved"`, 1), `"approver": ""`, `"approver": "bob"`, 1),
	} {
		for _, kc := range []string{aliceKC, piaKC} {
			if out, err := kubectlAs(t, kc, stripServerFields(t, forged), "create", "-f", "-"); err == nil || !strings.Contains(out, gate.DenialPrefix+gate.MsgCreate) {
				t.Fatalf("forged create as %s: %v\n%s", kc, err, out)
			}
		}
	}
	mustRun(t, alice, "propose", "--preflight", pf)
	out, stderr, code = run(t, bob, "approve", "--preflight", pf, "--reason", "reviewed the diff")
	if code != 0 || !strings.Contains(out, "approved: ") || !strings.Contains(stderr, "approve: install 3.0.0 in namespace "+ns) || !strings.Contains(stderr, "proposed by alice, as bob") {
		t.Fatalf("approve: exit %d\n%s\n%s", code, out, stderr)
	}
	var st approval.StatusReport
	if err := json.Unmarshal([]byte(mustRun(t, bob, "approval", "status", "-n", ns, "-o", "json")), &st); err != nil || st.Approval == nil ||
		st.Approval.Decision != record.Approved || st.Approval.Proposer != "alice" || st.Approval.Approver != "bob" || !st.MatchesHead {
		t.Fatalf("status: %+v %v", st, err)
	}

	pf2 := filepath.Join(t.TempDir(), "pf2.json")
	mustRun(t, nil, "preflight", releaseCopy(t, "v3.1.0", ns, ""), "--transition", "install", "--expected-head", deploy.AbsentToken, "--out", pf2)
	if out, _, code := run(t, alice, "propose", "--preflight", pf2); code != 0 || !strings.Contains(out, "replaced: ") {
		t.Fatalf("propose the second record: exit %d: %s", code, out)
	}
	if _, stderr, code := run(t, bob, "reject", "--preflight", pf2); code != 2 || !strings.Contains(stderr, "reason") {
		t.Fatalf("reject without --reason: exit %d: %s", code, stderr)
	}
	if out, stderr, code := run(t, bob, "reject", "--preflight", pf2, "--reason", "not this week"); code != 0 || !strings.Contains(out, "rejected: ") || !strings.Contains(stderr, "reject: install 3.1.0 in namespace "+ns) {
		t.Fatalf("reject: exit %d\n%s\n%s", code, out, stderr)
	}
	if _, stderr, code := run(t, bob, "approve", "--preflight", pf); code != 3 || !strings.Contains(stderr, "rejected by bob") {
		t.Fatalf("approve the superseded record: exit %d: %s", code, stderr)
	}

	// The Head moves (the admin installs 3.0.0): an approval of a record
	// made against the old Head is no longer valid, and status says so.
	mustRun(t, nil, "apply", "--preflight", pf)
	if _, stderr, code := run(t, alice, "propose", "--preflight", pf2, "--replace"); code != 3 || !strings.Contains(stderr, "head "+ns+" moved") {
		t.Fatalf("propose after the Head moved: exit %d: %s", code, stderr)
	}
	st = approval.StatusReport{}
	if err := json.Unmarshal([]byte(mustRun(t, bob, "approval", "status", "-n", ns, "-o", "json")), &st); err != nil || st.MatchesHead || st.Head == deploy.AbsentToken {
		t.Fatalf("status after the Head moved: %+v %v", st, err)
	}
}

// stripServerFields drops what the API server set (uid, resourceVersion,
// creationTimestamp, managedFields) from a ConfigMap's JSON, for a create.
func stripServerFields(t *testing.T, s string) string {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal([]byte(s), &obj); err != nil {
		t.Fatal(err)
	}
	md := obj["metadata"].(map[string]any)
	for _, k := range []string{"uid", "resourceVersion", "creationTimestamp", "managedFields"} {
		delete(md, k)
	}
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
