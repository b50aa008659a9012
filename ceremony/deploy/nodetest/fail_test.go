package nodetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/testcluster/nodeimage"
)

// absentImageInput is the documented input of absentImage's digest.
const absentImageInput = "kubectl-ql3 nodetest: an image never imported into the node"

// absentImage is a reference pinned by digest (as a lock requires) to an
// image the node never imported: with imagePullPolicy Never its pods wait
// in ErrImageNeverPull. The digest is the SHA-256 of absentImageInput.
func absentImage() string {
	sum := sha256.Sum256([]byte(absentImageInput))
	return "ql3.local/workload:absent@sha256:" + hex.EncodeToString(sum[:])
}

// installed installs web 1.0.0 of the workload image into a new namespace
// and returns the namespace, the options and the committed Head's token.
func installed(t *testing.T, timeout time.Duration) (string, deploy.Options, deploy.ExpectedHead) {
	t.Helper()
	ns := cp.Namespace(t)
	cl, o := nodeOptions(t)
	deployRelease(t, o, web(t, ns, "1.0.0", cp.Image(nodeimage.Workload)), deploy.TransitionInstall, deploy.ExpectedHead{})
	h, err := deploy.ReadHead(context.Background(), cl, ns)
	if err != nil {
		t.Fatal(err)
	}
	o.Timeout = timeout
	return ns, o, h.Expected()
}

// upgradeFails preflights and applies the upgrade of dir, which must fail:
// it returns how long apply took and the error, and checks the Head was left
// applying generation 2.
func upgradeFails(t *testing.T, o deploy.Options, ns, dir string, exp deploy.ExpectedHead) (time.Duration, error) {
	t.Helper()
	ctx := context.Background()
	pf, err := deploy.RunPreflight(ctx, o, deploy.PreflightRequest{Dir: dir, Transition: deploy.TransitionUpgrade, Expected: exp,
		Out: filepath.Join(t.TempDir(), "preflight.json")})
	if err != nil {
		t.Fatalf("preflight: %v", err)
	}
	start := time.Now()
	_, err = deploy.RunApply(ctx, o, deploy.ApplyRequest{Preflight: pf.Record})
	took := time.Since(start)
	if err == nil {
		t.Fatal("apply of an image that cannot run committed")
	}
	h, herr := deploy.ReadHead(ctx, o.Cluster, ns)
	if herr != nil {
		t.Fatal(herr)
	}
	if h.Phase != deploy.PhaseApplying || h.Generation != 2 {
		t.Fatalf("Head after the failed upgrade: generation %d %s, want 2 applying", h.Generation, h.Phase)
	}
	return took, err
}

// applyingToken is the expected-Head token of the Head of ns, which the
// ways out of an applying generation name.
func applyingToken(t *testing.T, o deploy.Options, ns string) string {
	t.Helper()
	h, err := deploy.ReadHead(context.Background(), o.Cluster, ns)
	if err != nil {
		t.Fatal(err)
	}
	return h.Expected().String()
}

// wantAll fails unless err's message holds every one of want.
func wantAll(t *testing.T, err error, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error does not say %q:\n%v", w, err)
		}
	}
}

// An upgrade to an image that cannot run, still within the Deployment's
// progress deadline when --timeout ends: exit 4, naming the pods' cause
// (ErrImageNeverPull, from the newest ReplicaSet's pod), not promising
// that rerunning settles it, and naming the ways out of generation 2.
func TestUnrunnableImageNamesThePodsCause(t *testing.T) {
	ns, o, exp := installed(t, 20*time.Second)
	took, err := upgradeFails(t, o, ns, web(t, ns, "1.1.0", absentImage()), exp)
	if !fail.Is(err, fail.Unavailable) {
		t.Fatalf("apply: %v (class %v), want unavailable (4)", err, fail.ClassOf(err))
	}
	tok := applyingToken(t, o, ns)
	wantAll(t, err, "apps/v1/Deployment/"+ns+"/web", "container web waiting: ErrImageNeverPull", "rerunning will not settle it",
		"kubectl ql3 preflight DIR --transition upgrade --supersede 2 --expected-head "+tok, "kubectl ql3 rollback DIR --expected-head "+tok+" --supersede 2")
	if strings.Contains(err.Error(), "rerunning settles") {
		t.Fatalf("error promises that rerunning settles it:\n%v", err)
	}
	if ready, _ := readyPods(t, ns, cp.Image(nodeimage.Workload)); ready != 2 {
		t.Fatalf("%d pods of the old image Ready, want 2 (the rollout must not have taken them down)", ready)
	}
	t.Logf("apply exited 4 after %s (--timeout %s): %v", took, o.Timeout, err)
}

// The same upgrade with progressDeadlineSeconds (5) shorter than --timeout
// (2m): the Deployment turns Failed (ProgressDeadlineExceeded) and apply
// exits 1 at once, long before --timeout, naming the pods' cause.
func TestRolloutPastItsDeadlineFails(t *testing.T) {
	ns, o, exp := installed(t, 2*time.Minute)
	took, err := upgradeFails(t, o, ns, webWithDeadline(t, ns, "1.1.0", absentImage(), 5), exp)
	if !fail.Is(err, fail.Other) {
		t.Fatalf("apply: %v (class %v), want other (1): a Failed rollout", err, fail.ClassOf(err))
	}
	wantAll(t, err, "Progress deadline exceeded", "container web waiting: ErrImageNeverPull",
		"kubectl ql3 preflight DIR --transition upgrade --supersede 2 --expected-head "+applyingToken(t, o, ns))
	if took >= o.Timeout {
		t.Fatalf("apply took %s, not less than --timeout %s", took, o.Timeout)
	}
	t.Logf("apply exited 1 after %s (progressDeadlineSeconds 5, --timeout %s): %v", took, o.Timeout, err)
}
