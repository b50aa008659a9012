package plugin_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Through the built binary: an upgrade that never converges (no node runs
// the control Deployment's replica) leaves the Head applying; a plain
// rollback is refused naming both ways out; rollback --supersede restores
// the last committed release; receipt audit and history say that
// generation 2 was superseded by generation 3.
func TestCLIRollbackSupersede(t *testing.T) {
	ns := controlNamespace(t)
	work := t.TempDir()
	rdir := filepath.Join(work, "receipts")
	v300 := releaseCopy(t, "v3.0.0", ns, "")
	stuck := releaseCopy(t, "v3.0.0", ns, "3.0.5")
	// One replica of the control Deployment, which no node runs; locked again.
	control := filepath.Join(stuck, "control.yaml")
	data, err := os.ReadFile(control)
	if err == nil {
		err = os.WriteFile(control, bytes.Replace(data, []byte("replicas: 0"), []byte("replicas: 1"), 1), 0o644)
	}
	if err == nil {
		err = os.Remove(filepath.Join(stuck, "ql3.lock.yaml"))
	}
	if err != nil {
		t.Fatal(err)
	}
	mustRun(t, nil, "lock", stuck, "--version", "3.0.5")

	pf1, pf2 := filepath.Join(work, "1.json"), filepath.Join(work, "2.json")
	mustRun(t, nil, "preflight", v300, "--transition", "install", "--expected-head", headToken(t, nil, ns), "--out", pf1)
	mustRun(t, nil, "apply", "--preflight", pf1, "--receipts-dir", rdir)
	mustRun(t, nil, "preflight", stuck, "--transition", "upgrade", "--expected-head", headToken(t, nil, ns), "--out", pf2)
	if _, stderr, code := run(t, nil, "apply", "--preflight", pf2, "--receipts-dir", rdir, "--timeout", "2s"); code != 4 {
		t.Fatalf("apply of an upgrade that never converges: exit %d, want 4\n%s", code, stderr)
	}
	tok := headToken(t, nil, ns)
	_, stderr, code := run(t, nil, "rollback", v300, "--expected-head", tok, "--receipts-dir", rdir, "--out", filepath.Join(work, "plain.json"))
	if code != 3 || !strings.Contains(stderr, "`kubectl ql3 rollback DIR --expected-head "+tok+" --supersede 2`") || !strings.Contains(stderr, "resume --preflight FILE") {
		t.Fatalf("rollback onto an applying Head: exit %d, want 3 naming resume and --supersede 2\n%s", code, stderr)
	}
	mustRun(t, nil, "rollback", v300, "--expected-head", tok, "--supersede", "2", "--receipts-dir", rdir, "--out", filepath.Join(work, "3.json"))
	if out := mustRun(t, nil, "receipt", "audit", rdir); !strings.Contains(out, "generation 2 (upgrade 3.0.5, preflight sha256:") || !strings.Contains(out, "generation 3 (rollback 3.0.0) superseded it") {
		t.Fatalf("receipt audit does not say generation 2 was superseded:\n%s", out)
	}
	out := mustRun(t, nil, "history", rdir, "-n", ns)
	if !strings.Contains(out, "superseded by 3") || !strings.Contains(out, "generation 2 (upgrade 3.0.5, preflight sha256:") || !strings.Contains(out, "never committed: superseded by generation 3 at ") {
		t.Fatalf("history does not show generation 2 superseded by 3:\n%s", out)
	}
	t.Logf("history:\n%s", out)
}

// --supersede is checked against --expected-head before anything is read:
// it names the token's generation, the applying one (exit 2 otherwise).
func TestSupersedeFlagsInvalid(t *testing.T) {
	tok := "ql3h1-2-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	for _, tt := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"preflight --supersede of another generation than the token's", []string{"preflight", "dir", "--transition", "rollback", "--supersede", "3", "--expected-head", tok}, "--supersede 3, but --expected-head names generation 2"},
		{"rollback --supersede negative", []string{"rollback", "dir", "--supersede", "-2", "--expected-head", tok}, "--supersede -2: want the applying generation"},
		{"rollback --supersede without a Head", []string{"rollback", "dir", "--supersede", "2", "--expected-head", "ql3h1-0-none"}, "--supersede 2, but --expected-head names generation 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, code := run(t, nil, tt.args...)
			if code != 2 || !strings.HasPrefix(stderr, "error: ") || !strings.Contains(stderr, tt.stderr) {
				t.Fatalf("exit %d, stderr %q; want exit 2 with %q", code, stderr, tt.stderr)
			}
		})
	}
}
