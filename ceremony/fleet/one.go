package fleet

import (
	"context"

	"github.com/qinglong/kubectl-ql3/ceremony/fleet/fleetfile"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/plan"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// WaveTarget is the name of the target at index of the plan's wave named
// wave, in the wave's order: what an Indexed Job's completion index
// stands for (docs/fleet.md §9). An unknown wave or an index out of range
// is fail.Invalid.
func WaveTarget(p *plan.Plan, wave string, index int) (string, error) {
	for _, w := range p.Waves {
		if w.Name != wave {
			continue
		}
		if index < 0 || index >= len(w.Targets) {
			return "", fail.Errorf(fail.Invalid, "--index %d: wave %s has %d target(s), want 0 to %d", index, wave, len(w.Targets), len(w.Targets)-1)
		}
		return w.Targets[index].Name, nil
	}
	return "", fail.Errorf(fail.Invalid, "--wave %q: the plan has no such wave", wave)
}

// CheckPlanDigest refuses a plan whose digest is not want: a Job pinned
// to the plan it was printed for runs no other, whoever changed its
// ConfigMap (fail.Tamper).
func CheckPlanDigest(p *plan.Plan, want string) error {
	if p.SelfDigest != want {
		return fail.Errorf(fail.Tamper, "the fleet plan's digest is %s, the run is pinned to %s (--plan-digest): the plan was changed after the Job was printed", p.SelfDigest, want)
	}
	return nil
}

// ApplyOne moves the one target named name to its plan entry, exactly as
// Apply moves each target of a wave (the same applyTarget: nothing when its
// Head committed the entry's record, resume when it is applying it, apply
// otherwise), then reads its Head back from its cluster: it must be at the
// plan. The error's class is the target's exit class (2 invalid, 3
// conflict, 4 unavailable, 5 tamper), the exit code of a pod of the
// fleet's Job. It neither checks the wave's gate nor the earlier waves:
// whoever runs it one target at a time (a Job, a CI matrix) keeps the
// waves' order; the record itself still carries the two-person rule a
// gated wave was preflighted with, which apply enforces.
func ApplyOne(ctx context.Context, o *Options, f *fleetfile.Fleet, req ApplyRequest, name string) (TargetResult, error) {
	p := req.Plan
	if err := p.Matches(f); err != nil {
		return TargetResult{Name: name, State: StateFailed, Error: err.Error(), Exit: exitOf(err)}, err
	}
	pt, wave, ok := p.Find(name)
	if !ok {
		err := fail.Errorf(fail.Invalid, "--target %q: the plan has no such target", name)
		return TargetResult{Name: name, State: StateFailed, Error: err.Error(), Exit: exitOf(err)}, err
	}
	o.say("wave %s: %s: one target of %d", p.Waves[wave].Name, name, len(p.Waves[wave].Targets))
	r := o.applyTarget(ctx, f, req, pt)
	if r.err == nil {
		if _, err := o.readBack(ctx, f, pt); err != nil {
			r.State, r.Error, r.Exit, r.err = StateFailed, err.Error(), exitOf(err), err
		}
	}
	if r.err != nil {
		o.say("%s: failed (exit %d): %v", name, r.Exit, r.err)
	}
	return r, r.err
}
