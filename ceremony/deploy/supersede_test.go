package deploy_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/faults"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// replaceInFile replaces the first old in the file at path with new.
func replaceInFile(t *testing.T, path, old, new string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// neverConverges is v3.0.0 relabelled as version with its control
// Deployment at one replica: the test control plane has no node, so it is
// never Available and an apply of it leaves the Head applying (exit 4).
func neverConverges(t *testing.T, ns, version string) string {
	t.Helper()
	dir := release(t, "v3.0.0", ns, version)
	replaceInFile(t, filepath.Join(dir, "control.yaml"), "replicas: 0", "replicas: 1")
	lockRelease(t, dir, version)
	return dir
}

// stuckUpgrade installs v3.0.0 and starts an upgrade to 3.0.5 that can
// never converge, given up after a short --timeout: the Head is applying
// generation 2. It returns the install's release, the stuck preflight and
// the applying Head.
func stuckUpgrade(t *testing.T, o deploy.Options, ns string) (string, *deploy.PreflightResult, *deploy.Head) {
	t.Helper()
	v300 := release(t, "v3.0.0", ns, "")
	deployRelease(t, o, v300, deploy.TransitionInstall, deploy.ExpectedHead{})
	pf := preflight(t, o, neverConverges(t, ns, "3.0.5"), deploy.TransitionUpgrade, headOf(t, ns).Expected())
	short := o
	short.Timeout = 2 * time.Second
	if _, err := deploy.RunApply(context.Background(), short, deploy.ApplyRequest{Preflight: pf.Record}); !fail.Is(err, fail.Unavailable) {
		t.Fatalf("apply of a release that never converges: %v (class %v), want unavailable", err, fail.ClassOf(err))
	}
	h := headOf(t, ns)
	if h.Phase != deploy.PhaseApplying || h.Generation != 2 {
		t.Fatalf("Head after the stuck upgrade: generation %d %s, want 2 applying", h.Generation, h.Phase)
	}
	return v300, pf, h
}

func supersedePreflight(t *testing.T, o deploy.Options, dir, kind string, stuck *deploy.Head) (*deploy.PreflightResult, error) {
	t.Helper()
	return deploy.RunPreflight(context.Background(), o, deploy.PreflightRequest{Dir: dir, Transition: kind, Expected: stuck.Expected(),
		Supersede: stuck.Generation, Out: filepath.Join(t.TempDir(), "supersede.json")})
}

// The stuck apply is still running (waiting in converge) when a rollback
// supersedes its generation: the rollback takes the Head by CAS from
// applying(2) to applying(3) and commits; the stuck process's converge then
// passes (the rollback made the Deployment Current) and its commit loses
// the compare-and-swap, exit 3. A resume of the superseded preflight is
// refused naming generation 3; the receipts audit as one chain with
// generation 2 declared superseded.
func TestSupersedeRollbackWhileStuckApplyRuns(t *testing.T) {
	ns := targetNamespace(t)
	rdir := t.TempDir()
	o := options(t, cluster(t, userConfig(t, "alice", "system:masters")), rdir)
	v300 := release(t, "v3.0.0", ns, "")
	r1 := deployRelease(t, o, v300, deploy.TransitionInstall, deploy.ExpectedHead{})
	h1 := headOf(t, ns)
	stuckPF := preflight(t, o, neverConverges(t, ns, "3.0.5"), deploy.TransitionUpgrade, h1.Expected())
	stuckDone := make(chan error, 1)
	go func() {
		_, err := deploy.RunApply(context.Background(), o, deploy.ApplyRequest{Preflight: stuckPF.Record}) // --timeout 2m
		stuckDone <- err
	}()
	var stuck *deploy.Head
	for deadline := time.Now().Add(time.Minute); ; {
		if h := headOf(t, ns); h.Phase == deploy.PhaseApplying && h.Generation == 2 {
			stuck = h
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stuck upgrade never acquired generation 2")
		}
		time.Sleep(50 * time.Millisecond) // polling the Head with a deadline
	}
	pf, err := supersedePreflight(t, o, v300, deploy.TransitionRollback, stuck)
	if err != nil {
		t.Fatalf("preflight --supersede 2: %v", err)
	}
	if s := pf.Record.Command.Supersedes; s == nil || s.Generation != 2 || s.PreflightDigest != stuckPF.Record.SelfDigest || s.MutationID != stuck.Transition.MutationID {
		t.Fatalf("record's supersedes %+v does not name the stuck transition", s)
	}
	res, err := deploy.RunApply(context.Background(), o, deploy.ApplyRequest{Preflight: pf.Record})
	if err != nil || res.Outcome != "committed" || res.Generation != 3 {
		t.Fatalf("apply of the superseding rollback: %+v %v", res, err)
	}
	if err := <-stuckDone; !fail.Is(err, fail.Conflict) {
		t.Fatalf("the stuck apply: %v (class %v), want conflict: its commit must lose the CAS", err, fail.ClassOf(err))
	}
	h3 := headOf(t, ns)
	ss := h3.Transition.Supersedes
	if h3.Generation != 3 || h3.Phase != deploy.PhaseCommitted || h3.Current.Deployment != h1.Current.Deployment || *h3.Previous != h1.Current.Deployment ||
		h3.PreviousReceiptDigest != readReceipt(t, r1.Receipt).SelfDigest || len(ss) != 1 || ss[0].Generation != 2 ||
		ss[0].PreflightDigest != stuckPF.Record.SelfDigest || ss[0].MutationID != stuck.Transition.MutationID || ss[0].Version != "3.0.5" {
		t.Fatalf("Head after the supersede: %+v", h3)
	}
	_, err = deploy.RunApply(context.Background(), o, deploy.ApplyRequest{Preflight: stuckPF.Record, Resume: true})
	if !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), "was superseded by generation 3 (rollback 3.0.0, committed)") {
		t.Fatalf("resume of the superseded preflight: %v (class %v), want conflict naming generation 3", err, fail.ClassOf(err))
	}
	rep, err := receipts.Audit([]string{rdir}, receipts.AuditOptions{})
	if err != nil || !rep.OK() || !strings.Contains(strings.Join(rep.Chain.Notes, "\n"), "generation 2 (upgrade 3.0.5, preflight "+stuckPF.Record.SelfDigest+") has no receipt") {
		t.Fatalf("audit: %v %+v %+v", err, rep.Chain, rep.Receipts)
	}
	// The Head is committed: a second supersede of it is refused.
	if _, err := supersedePreflight(t, o, v300, deploy.TransitionRollback, h3); !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "is committed, not applying") {
		t.Fatalf("supersede of a committed Head: %v (class %v), want invalid", err, fail.ClassOf(err))
	}
}

// A supersede and a resume of the stuck generation race for the applying
// Head, driven both ways: each has read and validated generation 2 and its
// Head write is held until the other has written; exactly the one that
// wrote first wins, and the other's compare-and-swap (the resourceVersion
// it validated) is a 409 it settles by reading: a conflict, exit 3.
func TestSupersedeRacesResume(t *testing.T) {
	t.Run("supersede first", func(t *testing.T) {
		se, re, h, stuck := raceSupersedeResume(t, false)
		if se != nil || !fail.Is(re, fail.Conflict) {
			t.Fatalf("supersede %v, resume %v (class %v): want the supersede to commit and the resume to conflict", se, re, fail.ClassOf(re))
		}
		if h.Generation != 3 || h.Phase != deploy.PhaseCommitted || len(h.Transition.Supersedes) != 1 || h.Transition.Supersedes[0].MutationID != stuck.Transition.MutationID {
			t.Fatalf("after the supersede won, the Head is generation %d %s, supersedes %+v", h.Generation, h.Phase, h.Transition.Supersedes)
		}
	})
	t.Run("resume first", func(t *testing.T) {
		se, re, h, stuck := raceSupersedeResume(t, true)
		if !fail.Is(se, fail.Conflict) || !fail.Is(re, fail.Unavailable) {
			t.Fatalf("supersede %v (class %v), resume %v (class %v): want the resume to take over (then wait out --timeout) and the supersede to conflict",
				se, fail.ClassOf(se), re, fail.ClassOf(re))
		}
		if h.Generation != 2 || h.Phase != deploy.PhaseApplying || h.Transition.MutationID == stuck.Transition.MutationID {
			t.Fatalf("after the resume won, the Head is generation %d %s mutation %s", h.Generation, h.Phase, h.Transition.MutationID)
		}
	})
}

// raceSupersedeResume holds the Head write of the loser-to-be (the
// supersede when resumeFirst, else the resume) until the other command
// has returned, and returns both outcomes and the Head.
func raceSupersedeResume(t *testing.T, resumeFirst bool) (supersedeErr, resumeErr error, h, stuck *deploy.Head) {
	ns := targetNamespace(t)
	o := options(t, cluster(t, userConfig(t, "alice", "system:masters")), t.TempDir())
	v300, stuckPF, stuck := stuckUpgrade(t, o, ns)
	pf, err := supersedePreflight(t, o, v300, deploy.TransitionRollback, stuck)
	if err != nil {
		t.Fatal(err)
	}
	held := userConfig(t, "alice", "system:masters")
	gate := faults.Hold(held, headWrite(ns, http.MethodPut, "applying"))
	slow, fast := options(t, cluster(t, held), t.TempDir()), o
	supersede := func(o deploy.Options) error {
		_, err := deploy.RunApply(context.Background(), o, deploy.ApplyRequest{Preflight: pf.Record})
		return err
	}
	resume := func(o deploy.Options) error {
		_, err := deploy.RunApply(context.Background(), o, deploy.ApplyRequest{Preflight: stuckPF.Record, Resume: true})
		return err
	}
	first, second := supersede, resume
	if resumeFirst {
		first, second = resume, supersede
		fast.Timeout = 2 * time.Second // the resume takes over, then waits out --timeout (no node: never Available)
	}
	secondErr := make(chan error, 1)
	go func() { secondErr <- second(slow) }()
	select {
	case <-gate.Reached():
	case err := <-secondErr:
		t.Fatalf("the held command ended before its Head write: %v", err)
	}
	firstErr := first(fast)
	gate.Release()
	errSecond := <-secondErr
	if resumeFirst {
		return errSecond, firstErr, headOf(t, ns), stuck
	}
	return firstErr, errSecond, headOf(t, ns), stuck
}

// Refusals, nothing written: a generation that is not the applying one,
// and a resume that landed between the supersede's preflight and its
// apply (the token it pinned moved: exit 3).
func TestSupersedeRefused(t *testing.T) {
	ns := targetNamespace(t)
	o := options(t, cluster(t, userConfig(t, "alice", "system:masters")), t.TempDir())
	v300, stuckPF, stuck := stuckUpgrade(t, o, ns)
	_, err := deploy.RunPreflight(context.Background(), o, deploy.PreflightRequest{Dir: v300, Transition: deploy.TransitionRollback, Expected: stuck.Expected(),
		Supersede: 1, Out: filepath.Join(t.TempDir(), "wrong.json")})
	if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "--supersede 1: the Head is applying generation 2") {
		t.Fatalf("--supersede of another generation: %v (class %v), want invalid", err, fail.ClassOf(err))
	}
	pf, err := supersedePreflight(t, o, v300, deploy.TransitionRollback, stuck)
	if err != nil {
		t.Fatal(err)
	}
	short := o
	short.Timeout = 2 * time.Second
	if _, err := deploy.RunApply(context.Background(), short, deploy.ApplyRequest{Preflight: stuckPF.Record, Resume: true}); !fail.Is(err, fail.Unavailable) {
		t.Fatalf("resume: %v", err)
	}
	before := headOf(t, ns)
	_, err = deploy.RunApply(context.Background(), o, deploy.ApplyRequest{Preflight: pf.Record})
	if !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), "moved since the preflight") {
		t.Fatalf("supersede after a resume took over: %v (class %v), want conflict", err, fail.ClassOf(err))
	}
	if after := headOf(t, ns); after.SelfDigest != before.SelfDigest {
		t.Fatalf("the refused supersede moved the Head: %+v", after)
	}
}
