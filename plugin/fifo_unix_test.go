//go:build unix

package plugin_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qinglong/kubectl-ql3/internal/testkit"
)

// boundedRun is run, bounded: a command still running after limit is
// killed and fails the test, so a read that blocks shows as a failure
// instead of a test that never ends.
func boundedRun(t *testing.T, limit time.Duration, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+cp.AdminKubeconfig), env...)
	stdout, stderr, code := testkit.Run(t, cmd)
	if ctx.Err() != nil {
		t.Fatalf("kubectl ql3 %s was still running after %s (killed): it blocked\n%s", strings.Join(args, " "), limit, stderr)
	}
	return stdout, stderr, code
}

// fifoAt makes path a named pipe that nobody writes to: opening it to read
// blocks until a writer comes, which none does.
func fifoAt(t *testing.T, path string) string {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// refusesFIFO runs args (bounded) and wants exit 2 with an error naming
// path as not a regular file.
func refusesFIFO(t *testing.T, path string, env []string, args ...string) {
	t.Helper()
	_, stderr, code := boundedRun(t, 30*time.Second, env, args...)
	if code != 2 || !strings.Contains(stderr, path) || !strings.Contains(stderr, "not a regular file") {
		t.Fatalf("kubectl ql3 %s: exit %d, want 2 naming %s as not a regular file:\n%s", strings.Join(args, " "), code, path, stderr)
	}
}

// A named pipe where the tool reads a file a user names — a receipt (an
// argument, or one named like a receipt in a directory `receipt audit`
// and `history` read), the preflight record, the delivery file, the
// token file, an environment bundle — is refused at once, exit 2, naming
// it: each of these commands used to block on the pipe for good.
func TestFIFOInPlaceOfAFile(t *testing.T) {
	dir := t.TempDir()
	rdir := filepath.Join(dir, "receipts")
	if err := os.Mkdir(rdir, 0o755); err != nil {
		t.Fatal(err)
	}
	receipt := fifoAt(t, filepath.Join(rdir, "000001-install-3.0.0.receipt.json"))
	pipe := fifoAt(t, filepath.Join(dir, "pipe"))
	ns, stageNS, _, wdir := wkSetup(t)
	delivery := wkDelivery(t, wdir, ns, "d-fifo", "cred-fifo", "", 1)
	for _, c := range []struct {
		name, path string
		args       []string
	}{
		{"receipt audit DIR", receipt, []string{"receipt", "audit", rdir}},
		{"receipt audit FILE", receipt, []string{"receipt", "audit", receipt}},
		{"history DIR", receipt, []string{"history", rdir}},
		{"apply --preflight", pipe, []string{"apply", "--preflight", pipe}},
		{"resume --preflight", pipe, []string{"resume", "--preflight", pipe}},
		{"approve --preflight", pipe, []string{"approve", "--preflight", pipe, "--reason", "reviewed"}},
		{"env-bundle verify", pipe, []string{"env-bundle", "verify", pipe}},
		{"worker stage --delivery", pipe, []string{"worker", "stage", "--delivery", pipe, "--token-file", "-", "--stage-namespace", stageNS}},
		// The token file, read once the delivery (a real one) has been read.
		{"worker stage --token-file", pipe, []string{"worker", "stage", "--delivery", delivery, "--token-file", pipe, "--stage-namespace", stageNS}},
	} {
		t.Run(c.name, func(t *testing.T) {
			refusesFIFO(t, c.path, nil, c.args...)
		})
	}
}

// apply's scan of the receipts directory for an earlier commit of its
// preflight (the Head has moved past it) reads only files named like
// receipts and refuses one that is a named pipe, exit 2, naming it,
// before any write; preflight refuses a named pipe at --out. Both used
// to block for good.
func TestFIFOInReceiptsDirAndOut(t *testing.T) {
	ns := controlNamespace(t)
	v300 := releaseCopy(t, "v3.0.0", ns, "")
	v310 := releaseCopy(t, "v3.1.0", ns, "")
	work := t.TempDir()
	rdir := filepath.Join(work, "receipts")
	install := filepath.Join(work, "install.json")
	mustRun(t, nil, "preflight", v300, "--transition", "install", "--expected-head", headToken(t, nil, ns), "--out", install)
	mustRun(t, nil, "apply", "--preflight", install, "--receipts-dir", rdir)

	t.Run("preflight --out", func(t *testing.T) {
		out := fifoAt(t, filepath.Join(work, "upgrade.json"))
		refusesFIFO(t, out, nil, "preflight", v310, "--transition", "upgrade", "--expected-head", headToken(t, nil, ns), "--out", out)
	})

	upgrade := filepath.Join(work, "upgrade2.json")
	mustRun(t, nil, "preflight", v310, "--transition", "upgrade", "--expected-head", headToken(t, nil, ns), "--out", upgrade)
	mustRun(t, nil, "apply", "--preflight", upgrade, "--receipts-dir", rdir)
	// The install's record again: the Head has moved past it, so apply
	// looks for its receipt, reading the directory in name order (the pipe
	// comes before the install's receipt).
	pipe := fifoAt(t, filepath.Join(rdir, "000001-install-2.9.0.receipt.json"))
	refusesFIFO(t, pipe, nil, "apply", "--preflight", install, "--receipts-dir", rdir)
	if h := headToken(t, nil, ns); !strings.HasPrefix(h, "ql3h1-2-") {
		t.Fatalf("the Head moved: %s", h)
	}
}
