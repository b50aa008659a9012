package plugin_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/approval"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
)

// The approver approves content, not only digests: the proposer shows bob
// release 3.1.0 and proposes another (a changed manifest, locked again).
// approve --release with the release bob reviewed is refused (exit 2), and
// the audit log shows no write by bob; reject without --release says what
// it did not check. The release bob reviewed, proposed, is approved with
// --release and --deployed, showing what it changes against the deployed
// 3.0.0. Each person holds exactly the printed role: the review needs no
// other permission.
func TestCLIApproveRelease(t *testing.T) {
	installApprovalPolicy(t)
	ns := controlNamespace(t)
	_, alice := userEnv(t, "alice")
	_, bob := userEnv(t, "bob")
	for _, g := range [][2]string{{approval.RoleProposer, "alice"}, {approval.RoleApprover, "bob"}} {
		rbac := mustRun(t, nil, "rbac", "--role", g[0], "-n", ns, "--bind-user", g[1])
		if out, err := kubectlAs(t, cp.AdminKubeconfig, rbac, "apply", "-f", "-"); err != nil {
			t.Fatalf("apply %s role: %v\n%s", g[0], err, out)
		}
	}
	work := t.TempDir()
	v300, v310 := releaseCopy(t, "v3.0.0", ns, ""), releaseCopy(t, "v3.1.0", ns, "")
	pf0 := filepath.Join(work, "install.json")
	mustRun(t, nil, "preflight", v300, "--transition", "install", "--expected-head", headToken(t, nil, ns), "--out", pf0)
	mustRun(t, nil, "apply", "--preflight", pf0, "--receipts-dir", filepath.Join(work, "receipts"))

	// What is proposed: 3.1.0 with the worker's image changed, locked again.
	other := releaseCopy(t, "v3.1.0", ns, "")
	otherImage(t, other)
	if err := os.Remove(filepath.Join(other, "ql3.lock.yaml")); err != nil {
		t.Fatal(err)
	}
	mustRun(t, nil, "lock", other, "--version", "3.1.0")
	token := headToken(t, nil, ns)
	pfOther := filepath.Join(work, "other.json")
	mustRun(t, nil, "preflight", other, "--transition", "upgrade", "--expected-head", token, "--out", pfOther)
	mustRun(t, alice, "propose", "--preflight", pfOther)
	approveRefused(t, ns, bob, pfOther, v300, v310)

	// Without --release: digests only, and it says so.
	out, stderr, code := run(t, bob, "reject", "--preflight", pfOther, "--reason", "not what I reviewed", "-o", "json")
	var res approval.Result
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.ContentChecked == nil || *res.ContentChecked || res.Review != nil ||
		!strings.Contains(res.NotChecked, "--release DIR") || !strings.Contains(stderr, "reject: content not checked: reject compared only the record's digests") {
		t.Fatalf("reject without --release: exit %d\n%s\n%s", code, out, stderr)
	}

	// The release bob reviewed, proposed: approved, its changes shown.
	pf := filepath.Join(work, "upgrade.json")
	mustRun(t, nil, "preflight", v310, "--transition", "upgrade", "--expected-head", token, "--out", pf)
	mustRun(t, alice, "propose", "--preflight", pf)
	if _, stderr, code := run(t, bob, "approve", "--preflight", pf, "--release", v310); code != 2 || !strings.Contains(stderr, "--release needs --deployed DIR_OLD") {
		t.Fatalf("approve --release without --deployed: exit %d\n%s", code, stderr)
	}
	out, stderr, code = run(t, bob, "approve", "--preflight", pf, "--release", v310, "--deployed", v300, "--reason", "reviewed the diff")
	t.Logf("approve --release:\n%s", out)
	for _, want := range []string{
		"created   v1/ConfigMap/" + ns + "/ql3-features", "created   v1/Service/" + ns + "/ql3-control-ai",
		"changed   apps/v1/Deployment/" + ns + "/ql3-worker",
		"--- deployed/apps/v1/Deployment/" + ns + "/ql3-worker", "-        image: registry.k8s.io/pause:3.10@", "+        image: registry.k8s.io/pause:3.10.1@",
		"approved: " + ns + "/" + record.Name,
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("approve --release: exit %d, %q not shown\n%s\n%s", code, want, out, stderr)
		}
	}
	if !strings.Contains(stderr, "approve: content checked: the release is preflight ") || strings.Contains(stderr, "content not checked") {
		t.Errorf("approve --release progress:\n%s", stderr)
	}
	var st approval.StatusReport
	if err := json.Unmarshal([]byte(mustRun(t, bob, "approval", "status", "-n", ns, "-o", "json")), &st); err != nil || st.Approval == nil ||
		st.Approval.Decision != record.Approved || st.Approval.Approver != "bob" || st.Approval.PreflightDigest != readRecordDigest(t, pf) {
		t.Fatalf("after approve --release: %+v %v", st, err)
	}
}

// otherImage changes the worker's image in the release directory dir.
func otherImage(t *testing.T, dir string) {
	t.Helper()
	worker := filepath.Join(dir, "worker.yaml")
	data, err := os.ReadFile(worker)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(worker, []byte(strings.Replace(string(data), "image: registry.k8s.io/pause:3.10.1@", "image: registry.k8s.io/pause:3.9@", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// approveRefused: bob's approve of the record pf (another release than
// v310) with --release v310, or with a copy of v310 whose manifest he
// edited without locking it again, is refused, exit 2; the audit log
// shows no ConfigMap write by bob, and the proposal stays pending.
func approveRefused(t *testing.T, ns string, bob []string, pf, v300, v310 string) {
	t.Helper()
	bobWrites := func() int { return len(cp.WriteVerbs(t, "bob", ns, "configmaps")) }
	before := bobWrites()
	_, stderr, code := run(t, bob, "approve", "--preflight", pf, "--release", v310, "--deployed", v300)
	if code != 2 || !strings.Contains(stderr, "--release "+v310+" is not the release preflight") || !strings.Contains(stderr, "release directory changed since the preflight") {
		t.Fatalf("approve --release with another release than the record's: exit %d, want 2\n%s", code, stderr)
	}
	edited := releaseCopy(t, "v3.1.0", ns, "")
	otherImage(t, edited)
	if _, stderr, code := run(t, bob, "approve", "--preflight", pf, "--release", edited, "--deployed", v300); code != 2 || !strings.Contains(stderr, "is not the release preflight") {
		t.Fatalf("approve --release with an edited release: exit %d, want 2\n%s", code, stderr)
	}
	if n := bobWrites(); n != before {
		t.Fatalf("the refused approves wrote %d time(s)", n-before)
	}
	var st approval.StatusReport
	if err := json.Unmarshal([]byte(mustRun(t, bob, "approval", "status", "-n", ns, "-o", "json")), &st); err != nil || st.Approval == nil || st.Approval.Decision != record.Pending {
		t.Fatalf("after the refused approves: %+v %v", st, err)
	}
}

// readRecordDigest is a preflight record's selfDigest.
func readRecordDigest(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		SelfDigest string `json:"selfDigest"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	return rec.SelfDigest
}
