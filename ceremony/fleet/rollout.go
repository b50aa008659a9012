package fleet

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/fleetfile"
	"github.com/qinglong/kubectl-ql3/ceremony/fleet/plan"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
	"github.com/qinglong/kubectl-ql3/receipts/rollout"
)

// proof is what the rollout receipt says of a committed target: its
// deployment receipt and that receipt's approval.
type proof struct {
	ref      *rollout.Ref
	approval *receipts.Approval
}

// prove publishes the deployment receipt of target pt's Head head, read
// back committed at the plan, into the target's receipts directory —
// rebuilt from the Head (deploy.ReceiptFromHead), so a target committed by
// an earlier run, from another machine or by a Job has its receipt here
// too, byte for byte the one its apply wrote (a replay when it is there).
func (o *Options) prove(f *fleetfile.Fleet, pt plan.Target, head *deploy.Head) (*proof, error) {
	r, err := deploy.ReceiptFromHead(head)
	if err != nil {
		return nil, err
	}
	ft, _ := f.Target(pt.Name)
	data, err := r.Bytes()
	if err != nil {
		return nil, err
	}
	dir := o.receipts(f, ft)
	path := filepath.Join(dir, receipts.FileName(r))
	if !receipts.Holds(path, data) {
		if path, err = o.publish(f, ft, r); err != nil {
			return nil, fmt.Errorf("target %s: receipt: %w", pt.Name, err)
		}
	}
	sum := sha256.Sum256(data)
	return &proof{
		ref:      &rollout.Ref{Path: pt.Name + "/" + filepath.Base(path), Digest: r.SelfDigest, SHA256: hex.EncodeToString(sum[:])},
		approval: r.Approval,
	}, nil
}

// publish writes target t's receipt r, missing from its receipts
// directory; signed, its attestation needs the release as applied
// (receipts.Rendered), so the target's release is loaded (from the render
// cache when it holds it) and must be the inventory the Head committed.
func (o *Options) publish(f *fleetfile.Fleet, t fleetfile.Target, r *receipts.Receipt) (string, error) {
	var rendered *receipts.Rendered
	if o.Deploy.SignKey != nil {
		tg, err := o.open(f, t)
		if err != nil {
			return "", err
		}
		opts := o.Deploy.Inventory
		opts.Mapper = tg.cl.Mapper()
		rel, _, _, err := inventory.LoadReleaseCached(o.Deploy.FS, f.Path(t.Release), opts, o.Deploy.RenderCache)
		if err != nil {
			return "", fmt.Errorf("the release, to attest the receipt: %w", err)
		}
		if rel.InventoryDigest != r.Deployment.InventoryDigest {
			return "", fail.Errorf(fail.Conflict, "release %s renders inventory %s, the Head committed %s: restore the release the plan applied to attest its receipt", t.Release, rel.InventoryDigest, r.Deployment.InventoryDigest)
		}
		if rendered, err = deploy.RenderedOf(rel); err != nil {
			return "", err
		}
	}
	pub, err := receipts.Publish(o.receipts(f, t), r, o.Deploy.SignKey, rendered)
	return pub.Path, err
}

// writeRollout publishes the rollout receipt of the run rep of plan p
// into the fleet's receipts directory (docs/fleet.md §8) and returns its
// path.
func (o *Options) writeRollout(f *fleetfile.Fleet, p *plan.Plan, rep *ApplyReport) (string, error) {
	rr := &rollout.Receipt{Plan: p.SelfDigest, FleetDigest: p.FleetDigest, Outcome: rep.Outcome,
		Tool: receipts.Tool{Name: p.Tool.Name, Version: p.Tool.Version, FieldManager: p.Tool.FieldManager}}
	for i, w := range p.Waves {
		wr := rep.Waves[i]
		rw := rollout.Wave{Name: w.Name, Gate: w.Gate, MaxFailures: w.MaxFailures, State: wr.State}
		for j, pt := range w.Targets {
			rw.Targets = append(rw.Targets, rolloutTarget(pt, wr.Targets[j]))
		}
		rr.Waves = append(rr.Waves, rw)
	}
	root := o.ReceiptsDir
	if root == "" {
		root = filepath.Join(f.Dir, "receipts")
	}
	res, err := rollout.Publish(root, rr, o.Deploy.SignKey)
	if err != nil {
		return "", fmt.Errorf("rollout receipt: %w", err)
	}
	o.say("rollout receipt: %s (%s)", res.Path, rr.SelfDigest)
	return res.Path, nil
}

// rolloutTarget is plan entry pt as the run r left it.
func rolloutTarget(pt plan.Target, r TargetResult) rollout.Target {
	t := rollout.Target{Name: pt.Name, ClusterIdentity: pt.ClusterIdentity, Namespace: pt.Namespace, Transition: pt.Transition,
		Version: pt.Version, Generation: pt.Generation, PreflightDigest: pt.PreflightDigest, InventoryDigest: pt.InventoryDigest}
	switch {
	case r.proof != nil:
		t.State, t.Receipt, t.Approval = rollout.TargetCommitted, r.proof.ref, r.proof.approval
	case r.State == StateFailed || r.State == StateAwaitsApproval:
		t.State, t.Exit, t.Reason = map[bool]string{true: rollout.TargetFailed, false: rollout.TargetAwaiting}[r.State == StateFailed], r.Exit, r.Error
	default:
		t.State = rollout.TargetNotStarted
	}
	return t
}
