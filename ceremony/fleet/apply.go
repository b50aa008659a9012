package fleet

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/fleetfile"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/plan"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// The states of a target in a fleet apply.
const (
	StateCommitted        = "committed"
	StateResumed          = "resumed"
	StateAlreadyCommitted = "already committed"
	StateFailed           = "failed"
	StateNotStarted       = "not started"
	StateAwaitsApproval   = "awaiting approval"
)

// The states of a wave.
const (
	WaveDone       = "done"
	WaveStopped    = "stopped"
	WaveNotStarted = "not started"
	WaveAwaiting   = "awaiting approval"
)

// ApplyRequest is `fleet apply --plan PLAN` of fleet file f.
type ApplyRequest struct {
	Plan    *plan.Plan
	PlanDir string // the plan record's directory: its preflights are relative to it
}

// WaveResult is one wave of a fleet apply.
type WaveResult struct {
	Name     string         `json:"name"`
	Gate     string         `json:"gate"`
	State    string         `json:"state"`
	Failures int            `json:"failures"`
	Targets  []TargetResult `json:"targets"`
}

// ApplyReport is a fleet apply: every wave, every target.
type ApplyReport struct {
	Plan    string       `json:"plan"`    // the plan's selfDigest
	Outcome string       `json:"outcome"` // done | stopped
	Waves   []WaveResult `json:"waves"`
	// Rollout is the rollout receipt written at the end (docs/fleet.md §8).
	Rollout string `json:"rollout,omitempty"`
}

// Apply runs the plan wave by wave (docs/fleet.md §5). Within a wave at
// most maxParallel targets move at once, each by deploy's apply (or resume,
// when its Head is applying this very record); once more than maxFailures
// failed, no further target of the wave starts. A wave is done only when
// every target that did not fail reads back, from its own cluster,
// committed at the plan's generation, preflight and inventory digest; it
// then soaks — stays healthy (status in sync) for its soak — before the
// next wave starts. A stopped wave stops the fleet: the waves after it are
// not started, and nothing is written to their clusters.
func Apply(ctx context.Context, o *Options, f *fleetfile.Fleet, req ApplyRequest) (*ApplyReport, error) {
	return o.applyWaves(ctx, f, req, o.runWave)
}

// waveRunner runs one wave: in process (runWave) or as a Job (ViaJob).
type waveRunner func(ctx context.Context, f *fleetfile.Fleet, req ApplyRequest, w plan.Wave) (WaveResult, []error)

// applyWaves runs the plan's waves in order with run until one stops.
func (o *Options) applyWaves(ctx context.Context, f *fleetfile.Fleet, req ApplyRequest, run waveRunner) (*ApplyReport, error) {
	p := req.Plan
	if err := p.Matches(f); err != nil {
		return nil, err
	}
	rep := &ApplyReport{Plan: p.SelfDigest, Outcome: WaveDone}
	var errs []error
	for _, w := range p.Waves {
		if rep.Outcome != WaveDone {
			rep.Waves = append(rep.Waves, notStarted(w))
			continue
		}
		wr, werrs := run(ctx, f, req, w)
		errs = append(errs, werrs...)
		if wr.State != WaveDone {
			rep.Outcome = WaveStopped
		}
		rep.Waves = append(rep.Waves, wr)
	}
	path, err := o.writeRollout(f, p, rep)
	rep.Rollout = path
	if err != nil {
		errs = append(errs, err)
	}
	return rep, summarize(rep, errs)
}

// summarize is the fleet's error: nil when every target committed the
// plan, else the decisive class of the failures, naming each.
func summarize(rep *ApplyReport, errs []error) error {
	var lines []string
	for _, w := range rep.Waves {
		for _, t := range w.Targets {
			if t.State == StateFailed || t.State == StateAwaitsApproval {
				lines = append(lines, fmt.Sprintf("wave %s: %s: %s", w.Name, t.Name, t.Error))
			}
		}
		if w.State == WaveNotStarted {
			lines = append(lines, fmt.Sprintf("wave %s: not started", w.Name))
		}
	}
	if len(errs) == 0 && len(lines) == 0 {
		return nil
	}
	return fail.Errorf(decisive(errs), "fleet apply %s: %s (fix what is named, then run fleet apply again: committed targets are skipped, applying ones resumed)", rep.Outcome, strings.Join(lines, "; "))
}

func notStarted(w plan.Wave) WaveResult {
	wr := WaveResult{Name: w.Name, Gate: w.Gate, State: WaveNotStarted}
	for _, t := range w.Targets {
		wr.Targets = append(wr.Targets, TargetResult{Name: t.Name, Namespace: t.Namespace, State: StateNotStarted})
	}
	return wr
}

// runWave runs one wave and returns its result and its targets' errors.
func (o *Options) runWave(ctx context.Context, f *fleetfile.Fleet, req ApplyRequest, w plan.Wave) (WaveResult, []error) {
	o.say("wave %s: %d target(s), at most %d at once, at most %d failure(s), soak %s, gate %s", w.Name, len(w.Targets), w.MaxParallel, w.MaxFailures, w.Soak(), w.Gate)
	if w.Gate == fleetfile.GateApproval {
		if wr, errs, waiting := o.gateWave(ctx, f, req, w); waiting {
			return wr, errs
		}
	}
	wr := WaveResult{Name: w.Name, Gate: w.Gate, Targets: make([]TargetResult, len(w.Targets))}
	var failures atomic.Int32
	sem := make(chan struct{}, w.MaxParallel)
	var wg sync.WaitGroup
	for i, pt := range w.Targets {
		sem <- struct{}{}
		if int(failures.Load()) > w.MaxFailures || ctx.Err() != nil {
			<-sem
			wr.Targets[i] = TargetResult{Name: pt.Name, Namespace: pt.Namespace, State: StateNotStarted}
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			r := o.applyTarget(ctx, f, req, pt)
			if r.err != nil {
				failures.Add(1)
				o.say("wave %s: %s: failed (exit %d): %v", w.Name, pt.Name, r.Exit, r.err)
			}
			wr.Targets[i] = r
		})
	}
	wg.Wait()
	return o.closeWave(ctx, f, w, wr)
}

// closeWave judges a wave whose targets ran: the Heads of those that did
// not fail are read back; the wave is done when at most maxFailures
// failed, and then it soaks.
func (o *Options) closeWave(ctx context.Context, f *fleetfile.Fleet, w plan.Wave, wr WaveResult) (WaveResult, []error) {
	var errs []error
	for i, pt := range w.Targets {
		r := &wr.Targets[i]
		if r.err == nil && r.State != StateNotStarted {
			head, err := o.readBack(ctx, f, pt)
			if err == nil {
				r.proof, err = o.prove(f, pt, head)
			}
			if err != nil {
				r.State, r.Error, r.Exit, r.err = StateFailed, err.Error(), exitOf(err), err
			}
		}
		if r.err != nil {
			wr.Failures++
			errs = append(errs, r.err)
		}
	}
	wr.State = WaveDone
	if wr.Failures > w.MaxFailures || notAllStarted(wr) {
		wr.State = WaveStopped
		o.say("wave %s: stopped: %d failure(s), at most %d allowed", w.Name, wr.Failures, w.MaxFailures)
		return wr, errs
	}
	if err := o.soak(ctx, f, w, wr); err != nil {
		wr.State = WaveStopped
		return wr, append(errs, err)
	}
	o.say("wave %s: done: %d of %d target(s) at the plan", w.Name, len(w.Targets)-wr.Failures, len(w.Targets))
	return wr, errs
}

func notAllStarted(wr WaveResult) bool {
	for _, t := range wr.Targets {
		if t.State == StateNotStarted {
			return true
		}
	}
	return false
}

// applyTarget moves one target to its plan entry pt: nothing when its Head
// already committed pt's record, resume when it is applying it, apply
// otherwise.
func (o *Options) applyTarget(ctx context.Context, f *fleetfile.Fleet, req ApplyRequest, pt plan.Target) TargetResult {
	ft, _ := f.Target(pt.Name)
	t, err := o.open(f, ft)
	if err != nil {
		return failed(ft, err)
	}
	rec, head, err := o.targetState(ctx, t, req, pt)
	if err != nil {
		return failed(ft, fmt.Errorf("target %s: %w", pt.Name, err))
	}
	r := TargetResult{Name: pt.Name, Namespace: pt.Namespace, Generation: pt.Generation, Version: pt.Version, Transition: pt.Transition}
	if atPlan(head, pt) {
		// Not moved by this run: its Head only claims the plan, and anyone
		// with the Head's update verb can write that claim. It counts once
		// the release's objects are live, as the release sets them, Current
		// (targetState has read the Head from the plan's cluster).
		if err := o.live(ctx, f, ft, t, pt); err != nil {
			return failed(ft, fmt.Errorf("%w (its Head says generation %d is committed, which counts only once the cluster runs it)", err, pt.Generation))
		}
		r.State = StateAlreadyCommitted
		o.say("%s: already committed generation %d (%s %s)", pt.Name, pt.Generation, pt.Transition, pt.Version)
		return r
	}
	resume := head != nil && head.Phase == deploy.PhaseApplying && head.Transition.PreflightDigest == pt.PreflightDigest
	r.State = StateCommitted
	if resume {
		r.State = StateResumed
	}
	o.say("%s: %s %s %s (generation %d)", pt.Name, map[bool]string{true: "resuming", false: "applying"}[resume], pt.Transition, pt.Version, pt.Generation)
	res, err := deploy.RunApply(ctx, t.do, deploy.ApplyRequest{Preflight: rec, Resume: resume, Dir: f.Path(ft.Release)})
	if err != nil {
		return failed(ft, fmt.Errorf("target %s: %w", pt.Name, err))
	}
	r.Receipt = res.Receipt
	o.say("%s: %s generation %d (%s)", pt.Name, r.State, res.Generation, res.Receipt)
	return r
}

// targetState checks that t's kubeconfig still reaches the plan's cluster
// and that its record is the plan's, and reads its Head.
func (o *Options) targetState(ctx context.Context, t *target, req ApplyRequest, pt plan.Target) (*deploy.PreflightRecord, *deploy.Head, error) {
	if err := sameCluster(ctx, t, pt); err != nil {
		return nil, nil, err
	}
	path := filepath.Join(req.PlanDir, filepath.FromSlash(pt.Preflight))
	rec, err := deploy.ReadPreflight(path)
	if err != nil {
		return nil, nil, err
	}
	if rec.SelfDigest != pt.PreflightDigest || rec.CommandDigest != pt.CommandDigest {
		return nil, nil, fail.Errorf(fail.Tamper, "preflight record %s is %s, the plan binds %s", path, rec.SelfDigest, pt.PreflightDigest)
	}
	head, err := deploy.ReadHead(ctx, t.cl, pt.Namespace)
	return rec, head, err
}

// sameCluster checks that t's kubeconfig and context reach plan entry
// pt's cluster: a Head read elsewhere says nothing of pt's.
func sameCluster(ctx context.Context, t *target, pt plan.Target) error {
	id, err := deploy.ReadClusterIdentity(ctx, t.cl)
	if err != nil {
		return err
	}
	if id != pt.ClusterIdentity {
		return fail.Errorf(fail.Invalid, "its kubeconfig and context reach cluster %s, the plan's is %s", id, pt.ClusterIdentity)
	}
	return nil
}

// atPlan says whether head committed plan entry pt exactly.
func atPlan(head *deploy.Head, pt plan.Target) bool {
	return head != nil && head.Phase == deploy.PhaseCommitted && head.Generation == pt.Generation &&
		head.Transition.PreflightDigest == pt.PreflightDigest && head.Current.InventoryDigest == pt.InventoryDigest
}

// headAt reads target pt's Head from its cluster, which must be the
// plan's (sameCluster): a Head read elsewhere says nothing of pt's.
func (o *Options) headAt(ctx context.Context, f *fleetfile.Fleet, pt plan.Target) (*deploy.Head, error) {
	ft, _ := f.Target(pt.Name)
	t, err := o.open(f, ft)
	if err != nil {
		return nil, err
	}
	if err := sameCluster(ctx, t, pt); err != nil {
		return nil, err
	}
	return deploy.ReadHead(ctx, t.cl, pt.Namespace)
}

// readBack reads target pt's Head from its cluster: it must be at the plan.
func (o *Options) readBack(ctx context.Context, f *fleetfile.Fleet, pt plan.Target) (*deploy.Head, error) {
	head, err := o.headAt(ctx, f, pt)
	if err != nil {
		return nil, fmt.Errorf("target %s: read back: %w", pt.Name, err)
	}
	if !atPlan(head, pt) {
		return nil, fail.Errorf(fail.Conflict, "target %s: its Head read back is %s, not the plan's generation %d committed (preflight %s)", pt.Name, describe(head), pt.Generation, pt.PreflightDigest)
	}
	return head, nil
}

func describe(h *deploy.Head) string {
	if h == nil {
		return "absent"
	}
	return fmt.Sprintf("generation %d %s (%s %s, preflight %s)", h.Generation, h.Phase, h.Transition.Kind, h.Current.Version, h.Transition.PreflightDigest)
}

// soak waits w's soak, then requires every target of w that reached the
// plan to be healthy: its Head still at the plan and every object present,
// in sync and current (status).
func (o *Options) soak(ctx context.Context, f *fleetfile.Fleet, w plan.Wave, wr WaveResult) error {
	d := w.Soak()
	if d <= 0 {
		return nil
	}
	o.say("wave %s: soaking %s", w.Name, d)
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return fail.Errorf(fail.Unavailable, "wave %s: soak interrupted: %v", w.Name, ctx.Err())
	case <-timer.C:
	}
	for i, pt := range w.Targets {
		if wr.Targets[i].err != nil {
			continue
		}
		if err := o.healthy(ctx, f, pt); err != nil {
			return fmt.Errorf("wave %s: after its soak of %s: %w", w.Name, d, err)
		}
	}
	return nil
}
