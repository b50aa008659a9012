package fleet

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/fleetfile"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/plan"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// TargetResult is what one command did on one target.
type TargetResult struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// State: locked / unchanged (lock), preflighted (preflight), and for
	// apply: committed, already committed, resumed, failed, not started,
	// waiting for approval.
	State string `json:"state"`
	// Path is the file written (the lock, the preflight record).
	Path string `json:"path,omitempty"`
	// Generation, Version and Transition: what the Head commits, or did.
	Generation int64  `json:"generation,omitempty"`
	Version    string `json:"version,omitempty"`
	Transition string `json:"transition,omitempty"`
	Receipt    string `json:"receipt,omitempty"`
	// Error and Exit: why the target failed, and its exit class.
	Error string `json:"error,omitempty"`
	Exit  int    `json:"exit,omitempty"`

	err   error
	proof *proof // apply: the committed target's receipt, for the rollout receipt
}

func failed(t fleetfile.Target, err error) TargetResult {
	return TargetResult{Name: t.Name, Namespace: t.Namespace, State: "failed", Error: err.Error(), Exit: exitOf(err), err: err}
}

// collect is the fleet's error from its targets' results: nil when none
// failed, else the decisive class naming every failed target.
func collect(what string, rs []TargetResult) error {
	var errs []error
	var names []string
	for _, r := range rs {
		if r.err != nil {
			errs = append(errs, r.err)
			names = append(names, fmt.Sprintf("%s (exit %d: %v)", r.Name, r.Exit, r.err))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fail.Errorf(decisive(errs), "fleet %s: %d of %d targets failed: %s", what, len(errs), len(rs), strings.Join(names, "; "))
}

// LockRequest is `fleet lock FILE --version V [--update]`.
type LockRequest struct {
	Version string
	Update  bool
}

// Lock writes every target's release lock for that target's cluster and
// control namespace (docs/lock.md), as `kubectl ql3 lock` does for one:
// the cluster identity read through the target's kubeconfig and context,
// kinds resolved by its RESTMapper.
func Lock(ctx context.Context, o *Options, f *fleetfile.Fleet, req LockRequest) ([]TargetResult, error) {
	rs := each(ctx, f, o.parallel(), func(ft fleetfile.Target) TargetResult {
		t, err := o.open(f, ft)
		if err != nil {
			return failed(ft, err)
		}
		r, err := lockTarget(ctx, f, t, req)
		if err != nil {
			return failed(ft, fmt.Errorf("target %s: lock %s: %w", ft.Name, f.Path(ft.Release), err))
		}
		o.say("%s: %s %s (namespace %s, version %s)", ft.Name, r.State, r.Path, ft.Namespace, req.Version)
		return r
	})
	return rs, collect("lock", rs)
}

func lockTarget(ctx context.Context, f *fleetfile.Fleet, t *target, req LockRequest) (TargetResult, error) {
	id, err := deploy.ReadClusterIdentity(ctx, t.cl)
	if err != nil {
		return TargetResult{}, err
	}
	opts := t.do.Inventory
	opts.Mapper = t.cl.Mapper()
	dir := f.Path(t.Release)
	rel, err := inventory.Render(t.do.FS, dir, opts)
	if err != nil {
		return TargetResult{}, err
	}
	if ns := rel.ControlNamespace; ns != t.Namespace {
		return TargetResult{}, fail.Errorf(fail.Invalid, "the release's control namespace is %q, the fleet file says %q", ns, t.Namespace)
	}
	lock, err := inventory.NewLock(rel, req.Version, id, t.do.ToolVersion)
	if err != nil {
		return TargetResult{}, err
	}
	data, err := lock.Marshal()
	if err != nil {
		return TargetResult{}, err
	}
	path := filepath.Join(dir, inventory.LockFile)
	wrote, err := inventory.WriteLockFile(path, data, req.Update)
	if err != nil {
		return TargetResult{}, err
	}
	state := "locked"
	if !wrote {
		state = "unchanged"
	}
	return TargetResult{Name: t.Name, Namespace: t.Namespace, State: state, Path: path, Version: req.Version}, nil
}

// PreflightRequest is `fleet preflight FILE`.
type PreflightRequest struct {
	// Transition is every target's: "" chooses install where the target
	// has no Head and upgrade where it has one; rollback returns every
	// target to the release its fleet file names (the previous one).
	Transition string
	// Out is the plan's directory: plan.json and preflights/<target>.json
	// (default <fleet dir>/plan).
	Out string
	// Approval is preflight --approval for every target ("", two-person,
	// none); a wave gated by approval always preflights two-person.
	Approval string
}

// PlanFile is the plan record's name in its directory.
const PlanFile = "plan.json"

// Preflight preflights every target against its Head as read now (each
// record pinned to that Head's token), bounded parallel, and writes the
// plan record binding them all by digest. Nothing is written to a
// cluster. A failed target fails the whole preflight: no plan is written.
func Preflight(ctx context.Context, o *Options, f *fleetfile.Fleet, req PreflightRequest) (*plan.Plan, string, []TargetResult, error) {
	out := req.Out
	if out == "" {
		out = filepath.Join(f.Dir, "plan")
	}
	if err := os.MkdirAll(filepath.Join(out, "preflights"), 0o755); err != nil {
		return nil, "", nil, fail.Errorf(fail.Invalid, "fleet preflight: %v", err)
	}
	gated := gatedTargets(f)
	entries := make([]plan.Target, len(f.Targets))
	rs := each(ctx, f, o.parallel(), func(ft fleetfile.Target) TargetResult {
		t, err := o.open(f, ft)
		if err != nil {
			return failed(ft, err)
		}
		approval := req.Approval
		if gated[ft.Name] {
			if approval == deploy.ApprovalNone {
				return failed(ft, fail.Errorf(fail.Invalid, "target %s: its wave is gated by approval, so --approval none does not apply to it", ft.Name))
			}
			approval = deploy.ApprovalTwoPerson
		}
		e, r, err := preflightTarget(ctx, f, t, req.Transition, approval, out)
		if err != nil {
			return failed(ft, fmt.Errorf("target %s: %w", ft.Name, err))
		}
		entries[indexOf(f, ft.Name)] = e
		o.say("%s: preflighted %s %s (generation %d, expected head %s)", ft.Name, e.Transition, e.Version, e.Generation, e.ExpectedHead)
		return r
	})
	if err := collect("preflight", rs); err != nil {
		return nil, "", rs, err
	}
	p, err := plan.Build(f, plan.Tool{Name: "kubectl-ql3", Version: o.Deploy.ToolVersion, FieldManager: inventory.FieldManager}, entries)
	if err != nil {
		return nil, "", rs, err
	}
	data, err := p.Bytes()
	if err != nil {
		return nil, "", rs, err
	}
	path := filepath.Join(out, PlanFile)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return nil, "", rs, fail.Errorf(fail.Invalid, "fleet preflight: write %s: %v", path, err)
	}
	o.say("plan %s written (%s): %d targets in %d waves", path, p.SelfDigest, len(f.Targets), len(f.Waves))
	return p, path, rs, nil
}

// preflightTarget runs one target's preflight and returns its plan entry.
func preflightTarget(ctx context.Context, f *fleetfile.Fleet, t *target, transition, approval, out string) (plan.Target, TargetResult, error) {
	head, err := deploy.ReadHead(ctx, t.cl, t.Namespace)
	if err != nil {
		return plan.Target{}, TargetResult{}, err
	}
	if transition == "" {
		transition = deploy.TransitionUpgrade
		if head == nil {
			transition = deploy.TransitionInstall
		}
	}
	rel := filepath.Join("preflights", t.Name+".json")
	path := filepath.Join(out, rel)
	rec, err := heldRecord(f, t, head, path)
	if err != nil {
		return plan.Target{}, TargetResult{}, err
	}
	if rec == nil {
		res, err := deploy.RunPreflight(ctx, t.do, deploy.PreflightRequest{Dir: f.Path(t.Release), Transition: transition,
			Expected: head.Expected(), Out: path, Approval: approval})
		if err != nil {
			return plan.Target{}, TargetResult{}, err
		}
		rec = res.Record
	}
	c := rec.Command
	e := plan.Target{Name: t.Name, ClusterIdentity: rec.Target.ClusterIdentity, Namespace: rec.Target.Namespace,
		Preflight: filepath.ToSlash(rel), PreflightDigest: rec.SelfDigest, CommandDigest: rec.CommandDigest,
		Transition: c.Transition, Version: c.Version, LockDigest: c.LockDigest, InventoryDigest: c.InventoryDigest,
		ExpectedHead: c.ExpectedHead.String(), Generation: c.ExpectedHead.Generation + 1}
	r := TargetResult{Name: t.Name, Namespace: t.Namespace, State: "preflighted", Path: path,
		Generation: e.Generation, Version: e.Version, Transition: e.Transition}
	return e, r, nil
}

// gatedTargets are the targets of the waves gated by approval.
func gatedTargets(f *fleetfile.Fleet) map[string]bool {
	out := map[string]bool{}
	for _, w := range f.Waves {
		if w.Gate == fleetfile.GateApproval {
			for _, n := range w.Targets {
				out[n] = true
			}
		}
	}
	return out
}

func indexOf(f *fleetfile.Fleet, name string) int {
	for i, t := range f.Targets {
		if t.Name == name {
			return i
		}
	}
	return -1
}

// heldRecord is the record already at path when the target's Head holds
// it — committed or applying its transition — and it is for the release as
// locked now: a rerun of fleet preflight after a partial apply keeps what
// is done (and what a resume will finish) instead of preflighting it again
// from a Head that moved past it. Any other record there is stale (another
// release, or a Head that has moved since): it is removed, and the target
// is preflighted afresh.
func heldRecord(f *fleetfile.Fleet, t *target, head *deploy.Head, path string) (*deploy.PreflightRecord, error) {
	rec, err := deploy.ReadPreflight(path)
	if os.IsNotExist(errors.Unwrap(err)) || errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err == nil && head != nil && head.Transition.PreflightDigest == rec.SelfDigest {
		lock, lerr := os.ReadFile(filepath.Join(f.Path(t.Release), inventory.LockFile))
		if l, perr := inventory.ParseLock(lock); lerr == nil && perr == nil {
			if d, derr := l.Digest(); derr == nil && d == rec.Command.LockDigest {
				return rec, nil
			}
		}
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return nil, fail.Errorf(fail.Invalid, "remove the stale preflight record %s: %v", path, err)
	}
	return nil, nil
}
