package fleet

import (
	"context"
	"fmt"
	"strings"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/fleetfile"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/plan"
	"github.com/qinglong/kubectl-ql3/ceremony/views"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// The states fleet status reports for a target.
const (
	AtPlan      = "at plan"
	Applying    = "applying"
	Behind      = "behind"
	Elsewhere   = "elsewhere"
	NoHead      = "absent"
	Unreachable = "unreachable"
	Unreadable  = "unreadable"
)

// TargetStatus is one target's Head as read from its cluster.
type TargetStatus struct {
	Name       string `json:"name"`
	Wave       string `json:"wave"`
	Namespace  string `json:"namespace"`
	State      string `json:"state"`
	Generation int64  `json:"generation,omitempty"`
	Phase      string `json:"phase,omitempty"`
	Version    string `json:"version,omitempty"`
	// Plan is the generation and version the plan moves it to.
	PlanGeneration int64  `json:"planGeneration"`
	PlanVersion    string `json:"planVersion"`
	Error          string `json:"error,omitempty"`

	err error
}

// StatusReport is `fleet status`: every target's Head, read now.
type StatusReport struct {
	Plan    string         `json:"plan"`
	Uniform bool           `json:"uniform"`
	Targets []TargetStatus `json:"targets"`
}

// Status reads every target's Head from its own cluster (bounded
// parallel) and compares it with the plan. Its error is nil only when
// every target is at the plan: conflict (3) when some Head is elsewhere,
// behind or applying, unavailable (4) when a cluster did not answer,
// tamper (5) when a Head failed verification.
func Status(ctx context.Context, o *Options, f *fleetfile.Fleet, p *plan.Plan) (*StatusReport, error) {
	if err := p.Matches(f); err != nil {
		return nil, err
	}
	rep := &StatusReport{Plan: p.SelfDigest, Uniform: true}
	sts := each(ctx, f, o.parallel(), func(ft fleetfile.Target) TargetStatus {
		pt, wave, _ := p.Find(ft.Name)
		st := TargetStatus{Name: ft.Name, Wave: p.Waves[wave].Name, Namespace: ft.Namespace, PlanGeneration: pt.Generation, PlanVersion: pt.Version}
		t, err := o.open(f, ft)
		if err != nil {
			st.State, st.Error, st.err = Unreachable, err.Error(), err
			return st
		}
		head, err := deploy.ReadHead(ctx, t.cl, ft.Namespace)
		if err == nil {
			err = sameCluster(ctx, t, pt)
		}
		if err != nil {
			st.State, st.Error, st.err = Unreadable, err.Error(), err
			if fail.Is(err, fail.Unavailable) {
				st.State = Unreachable
			}
			return st
		}
		st.State = stateOf(head, pt)
		if head != nil {
			st.Generation, st.Phase, st.Version = head.Generation, head.Phase, head.Current.Version
		}
		return st
	})
	var errs []error
	var off []string
	for _, st := range sts {
		if st.State != AtPlan {
			rep.Uniform = false
			off = append(off, fmt.Sprintf("%s %s", st.Name, st.State))
			if st.err == nil {
				st.err = fail.Errorf(fail.Conflict, "%s", st.State)
			}
			errs = append(errs, st.err)
		}
		rep.Targets = append(rep.Targets, st)
	}
	if rep.Uniform {
		return rep, nil
	}
	return rep, fail.Errorf(decisive(errs), "fleet status: %d of %d targets are not at the plan: %s", len(off), len(sts), strings.Join(off, ", "))
}

// stateOf is head's state against plan entry pt.
func stateOf(head *deploy.Head, pt plan.Target) string {
	switch {
	case atPlan(head, pt):
		return AtPlan
	case head == nil:
		return NoHead
	case head.Phase == deploy.PhaseApplying:
		return Applying
	case head.Generation < pt.Generation:
		return Behind
	}
	return Elsewhere
}

// healthy: target pt's Head reads back at the plan (readBack) and its
// objects are live as its release sets them (live).
func (o *Options) healthy(ctx context.Context, f *fleetfile.Fleet, pt plan.Target) error {
	if _, err := o.readBack(ctx, f, pt); err != nil {
		return err
	}
	ft, _ := f.Target(pt.Name)
	t, err := o.open(f, ft)
	if err != nil {
		return err
	}
	return o.live(ctx, f, ft, t, pt)
}

// live: status, given target pt's release, finds every object present,
// holding the release's values (each dry-run and compared, whoever wrote
// it: a field manager's name is not evidence), current, with no bypass. A
// Head is a claim anyone with its update verb can write; the objects the
// API server serves are what the release is running.
func (o *Options) live(ctx context.Context, f *fleetfile.Fleet, ft fleetfile.Target, t *target, pt plan.Target) error {
	applied, err := o.released(f, ft, t, pt)
	if err != nil {
		return fmt.Errorf("target %s: %w", pt.Name, err)
	}
	st, err := views.Status(ctx, t.cl, pt.Namespace, 0, applied)
	if err != nil {
		return fmt.Errorf("target %s: %w", pt.Name, err)
	}
	if err := st.Err(); err != nil {
		return fmt.Errorf("target %s: %w", pt.Name, err)
	}
	return nil
}

// released is target ft's release (from the render cache when it holds
// it), verified against its lock, which must be plan entry pt's: what
// status compares the live objects with.
func (o *Options) released(f *fleetfile.Fleet, ft fleetfile.Target, t *target, pt plan.Target) (*views.Applied, error) {
	opts := o.Deploy.Inventory
	opts.Mapper = t.cl.Mapper()
	rel, lock, _, err := inventory.LoadReleaseCached(o.Deploy.FS, f.Path(ft.Release), opts, o.Deploy.RenderCache)
	if err != nil {
		return nil, fmt.Errorf("its release %s, to compare the live objects with: %w", ft.Release, err)
	}
	digest, err := lock.Digest()
	if err != nil {
		return nil, fmt.Errorf("its release %s: lock digest: %w", ft.Release, err)
	}
	if digest != pt.LockDigest {
		return nil, fail.Errorf(fail.Conflict, "its release %s is locked as %s, the plan's record %s: restore the release the plan applied to compare the live objects with it", ft.Release, digest, pt.LockDigest)
	}
	return &views.Applied{LockDigest: digest, Objects: rel.Objects}, nil
}

// gateWave checks, before a wave gated by approval starts, that every
// target not yet at the plan has its record approved by a second person
// (the two-person rule's gate, exactly as apply checks it). Any that is
// not: the wave awaits approval and nothing of it is written.
func (o *Options) gateWave(ctx context.Context, f *fleetfile.Fleet, req ApplyRequest, w plan.Wave) (WaveResult, []error, bool) {
	wr := WaveResult{Name: w.Name, Gate: w.Gate, State: WaveAwaiting}
	var errs []error
	for _, pt := range w.Targets {
		r := TargetResult{Name: pt.Name, Namespace: pt.Namespace, State: StateNotStarted}
		if err := o.approvedOrDone(ctx, f, req, pt); err != nil {
			r.State, r.Error, r.Exit, r.err = StateAwaitsApproval, err.Error(), exitOf(err), err
			errs = append(errs, err)
		}
		wr.Targets = append(wr.Targets, r)
	}
	if len(errs) == 0 {
		return WaveResult{}, nil, false
	}
	o.say("wave %s: awaits a second person's approval of %d record(s): kubectl ql3 propose --preflight RECORD, then another person approves it (each target's own kubeconfig and context)", w.Name, len(errs))
	return wr, errs, true
}

func (o *Options) approvedOrDone(ctx context.Context, f *fleetfile.Fleet, req ApplyRequest, pt plan.Target) error {
	ft, _ := f.Target(pt.Name)
	t, err := o.open(f, ft)
	if err != nil {
		return err
	}
	_, head, err := o.targetState(ctx, t, req, pt)
	if err != nil || atPlan(head, pt) || (head != nil && head.Phase == deploy.PhaseApplying) {
		return err
	}
	if _, err := gate.Check(ctx, t.cl.Clientset(), pt.Namespace, pt.PreflightDigest, pt.CommandDigest, pt.ExpectedHead); err != nil {
		return fmt.Errorf("target %s: record %s: %w", pt.Name, pt.Preflight, err)
	}
	return nil
}
