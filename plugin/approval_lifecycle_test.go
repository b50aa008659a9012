package plugin_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
)

// adminEnv is the environment of the built plugin run as user, a
// cluster admin (system:masters) with its own client certificate: only
// the approval policy, not RBAC, stands between them and a forgery.
func adminEnv(t *testing.T, user string) []string {
	t.Helper()
	kc, err := cp.Kubeconfig(user, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	return []string{"KUBECONFIG=" + kc}
}

// oidcApprover is the environment of the built plugin as the OIDC user
// bob (oidc:bob to the API server), whose token reaches it through the
// kubeconfig's exec credential plugin, granted exactly the printed
// approver role in ns by the admin.
func oidcApprover(t *testing.T, ns string) []string {
	t.Helper()
	rbac := mustRun(t, nil, "rbac", "--role", "approver", "-n", ns, "--bind-user", testcluster.OIDCPrefix+"bob")
	if out, err := kubectlAs(t, cp.AdminKubeconfig, rbac, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply the approver role: %v\n%s", err, out)
	}
	return []string{"KUBECONFIG=" + cp.OIDCUser(t, "bob")}
}

// The lifecycle of the two-person rule (docs/guide-two-person-rule.md) through the built binary,
// each person with their own kubeconfig: alice opts in at preflight, apply
// refuses until bob approved (exit 2), alice proposes, bob approves, alice
// applies; the receipt audits, and history names both. Bob is a client
// certificate, then an OIDC identity through the exec plugin (#26 point 4).
func TestCLITwoPersonLifecycle(t *testing.T) {
	for _, tt := range []struct {
		name, approver string
		env            func(t *testing.T, ns string) []string
	}{
		{"certificate", "bob", func(t *testing.T, _ string) []string { return adminEnv(t, "bob") }},
		{"oidc", testcluster.OIDCPrefix + "bob", oidcApprover},
	} {
		t.Run(tt.name, func(t *testing.T) { twoPersonLifecycle(t, tt.approver, tt.env) })
	}
}

func twoPersonLifecycle(t *testing.T, approver string, approverEnv func(t *testing.T, ns string) []string) {
	installApprovalPolicy(t)
	ns := controlNamespace(t)
	alice, bob := adminEnv(t, "alice"), approverEnv(t, ns)
	pf, rdir := filepath.Join(t.TempDir(), "pf.json"), t.TempDir()
	pfOut, stderr, code := run(t, alice, "preflight", releaseCopy(t, "v3.0.0", ns, ""), "--transition", "install", "--expected-head", deploy.AbsentToken, "--approval", "two-person", "--out", pf)
	if code != 0 || !strings.Contains(stderr, "proposer alice") || !strings.Contains(pfOut, "next: kubectl ql3 propose --preflight "+pf) {
		t.Fatalf("preflight --approval two-person: exit %d\n%s\n%s", code, pfOut, stderr)
	}
	if _, stderr, code := run(t, alice, "apply", "--preflight", pf, "--receipts-dir", rdir); code != 2 || !strings.Contains(stderr, "needs a second person's approval") {
		t.Fatalf("apply before any approval: exit %d, want 2\n%s", code, stderr)
	}
	if _, stderr, code := run(t, alice, "propose", "--preflight", pf); code != 0 {
		t.Fatalf("propose: exit %d\n%s", code, stderr)
	}
	if _, stderr, code := run(t, bob, "approve", "--preflight", pf, "--reason", "reviewed the diff"); code != 0 {
		t.Fatalf("approve: exit %d\n%s", code, stderr)
	}
	if _, stderr, code := run(t, alice, "apply", "--preflight", pf, "--receipts-dir", rdir); code != 0 || !strings.Contains(stderr, "approved by "+approver+" (proposed by alice") {
		t.Fatalf("apply after the approval: exit %d\n%s", code, stderr)
	}
	if out, stderr, code := run(t, nil, "receipt", "audit", rdir); code != 0 {
		t.Fatalf("receipt audit: exit %d\n%s\n%s", code, out, stderr)
	}
	out, stderr, code := run(t, nil, "history", rdir)
	row := strings.Fields(strings.Split(out, "\n")[1])
	if code != 0 || !strings.HasPrefix(out, "GEN ") || len(row) < 12 || row[9] != "alice" || row[10] != approver {
		t.Fatalf("history: exit %d, row %q\n%s\n%s", code, row, out, stderr)
	}
	bypassIsEvident(t, ns, rdir, approver)
}
