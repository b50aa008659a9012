package plugin_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
)

// preflight --apply through the built binary: the preflight and the apply
// of its record in one process. It commits what apply --preflight would
// (so that record applied again is a replay), the receipts audit, and
// flags that mean nothing without the apply, or a receipts directory that
// cannot be written, are refused before any record is written.
func TestCLIPreflightApply(t *testing.T) {
	ns := controlNamespace(t)
	v300 := releaseCopy(t, "v3.0.0", ns, "")
	v310 := releaseCopy(t, "v3.1.0", ns, "")
	work := t.TempDir()
	rdir := filepath.Join(work, "receipts")

	pf := filepath.Join(work, "install.json")
	out := mustRun(t, nil, "preflight", v300, "--transition", "install", "--expected-head", deploy.AbsentToken, "--out", pf, "--apply", "--receipts-dir", rdir, "-o", "json")
	var res deploy.ApplyResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Outcome != "committed" || res.Generation != 1 || filepath.Dir(res.Receipt) != rdir || res.ReceiptState != "written" {
		t.Fatalf("preflight --apply -o json: %v\n%s", err, out)
	}
	if out, stderr, code := run(t, nil, "apply", "--preflight", pf, "--receipts-dir", rdir); code != 0 || !strings.Contains(out, "replayed") || !strings.Contains(stderr, "replay, no workload write") {
		t.Fatalf("apply of the record preflight --apply wrote: exit %d, want a replay\n%s\n%s", code, out, stderr)
	}

	file := filepath.Join(work, "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	token := headToken(t, nil, ns)
	refused := filepath.Join(work, "refused.json")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--apply", "--diff"}, "--diff is for a review before apply"},
		{[]string{"--receipts-dir", rdir}, "--receipts-dir and --sign-key are apply's"},
		{[]string{"--sign-key", file}, "--receipts-dir and --sign-key are apply's"},
		{[]string{"--apply", "--receipts-dir", filepath.Join(file, "receipts")}, "receipts directory"},
	} {
		args := append([]string{"preflight", v310, "--transition", "upgrade", "--expected-head", token, "--out", refused}, tt.args...)
		if _, stderr, code := run(t, nil, args...); code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("preflight %s: exit %d, want 2 and %q\n%s", strings.Join(tt.args, " "), code, tt.want, stderr)
		}
		if _, err := os.Stat(refused); !os.IsNotExist(err) {
			t.Fatalf("preflight %s refused, yet its record was written (%v)", strings.Join(tt.args, " "), err)
		}
	}
	if got := headToken(t, nil, ns); got != token {
		t.Fatalf("the refused commands moved the Head: %s, was %s", got, token)
	}

	out = mustRun(t, nil, "preflight", v310, "--transition", "upgrade", "--expected-head", token, "--out", filepath.Join(work, "upgrade.json"), "--apply", "--receipts-dir", rdir)
	if !strings.Contains(out, "committed: generation 2, upgrade 3.1.0") {
		t.Fatalf("preflight --apply of the upgrade:\n%s", out)
	}
	audit := mustRun(t, nil, "receipt", "audit", rdir, "--release", v310)
	if !strings.Contains(audit, "000001-install-3.0.0.receipt.json") || !strings.Contains(audit, "000002-upgrade-3.1.0.receipt.json") {
		t.Fatalf("audit:\n%s", audit)
	}
}

// Under the two-person rule preflight --apply is refused by the same gate
// as apply (exit 2): the record is written, for another person to
// approve, and the Head is not acquired.
func TestCLIPreflightApplyTwoPerson(t *testing.T) {
	installApprovalPolicy(t)
	ns := controlNamespace(t)
	alice := adminEnv(t, "alice")
	pf := filepath.Join(t.TempDir(), "pf.json")
	_, stderr, code := run(t, alice, "preflight", releaseCopy(t, "v3.0.0", ns, ""), "--transition", "install", "--expected-head", deploy.AbsentToken,
		"--approval", "two-person", "--out", pf, "--apply", "--receipts-dir", t.TempDir())
	if code != 2 || !strings.Contains(stderr, "needs a second person's approval") || !strings.Contains(stderr, "the Head not acquired: once another person approved this record, `kubectl ql3 apply --preflight "+pf+"` applies it") {
		t.Fatalf("preflight --approval two-person --apply: exit %d, want 2 and the gate's refusal\n%s", code, stderr)
	}
	if _, err := deploy.ReadPreflight(pf); err != nil {
		t.Fatalf("the refused apply's record: %v", err)
	}
	if got := headToken(t, nil, ns); got != deploy.AbsentToken {
		t.Fatalf("the refused apply acquired the Head: %s", got)
	}
}
