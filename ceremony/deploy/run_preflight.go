package deploy

import (
	"context"
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// PreflightRequest is `kubectl ql3 preflight DIR`.
type PreflightRequest struct {
	Dir            string
	Transition     string
	Expected       ExpectedHead
	ForceConflicts bool
	// Supersede (preflight --supersede N), when not 0, is the applying
	// generation this transition supersedes (docs/ceremony.md §7.5); the
	// Expected token is then that applying Head's.
	Supersede int64
	Out       string // record path; default ql3-preflight-g<N>-<kind>-<version>.json
	// Approval (preflight --approval) is "two-person" or "none"; "" keeps
	// the committed Head's policy (no Head: none).
	Approval string
	// Diff, when set (preflight --diff), computes the change list of the
	// verified release after the dry-run step and returns its digest,
	// which the record binds as diffDigest. dryRun holds each object as
	// the preflight's dry-run answered it, aligned with objs (nil: deferred
	// until its namespace or CRD exists), so no object is dry-run twice.
	Diff func(ctx context.Context, objs, dryRun []*unstructured.Unstructured, fieldManager string, force bool) (string, error)

	thenApply bool // RunPreflightApply: the record is applied next
}

// PreflightResult says what preflight verified and where the record is.
type PreflightResult struct {
	Path     string           `json:"path"`
	Replayed bool             `json:"replayed"`
	Deferred int              `json:"deferred"`
	Record   *PreflightRecord `json:"record"`

	loaded *loaded // the release as this preflight verified it
}

// ApplyRequest is the request to apply this very preflight in the same
// process (rollback): the release it rendered and verified against its
// lock is applied as is, not rendered a second time.
func (p *PreflightResult) ApplyRequest() ApplyRequest {
	return ApplyRequest{Preflight: p.Record, loaded: p.loaded}
}

// RunPreflight is docs/ceremony.md §5: read-only against the cluster; writes
// only the preflight record, never replacing a file.
func RunPreflight(ctx context.Context, o Options, req PreflightRequest) (*PreflightResult, error) {
	o.defaults()
	dir, err := filepath.Abs(req.Dir)
	if err != nil {
		return nil, fail.Wrap(fail.Invalid, err)
	}
	ld, err := o.load(dir)
	if err != nil {
		return nil, err
	}
	dep, tgt := ld.deployment(), ld.target()
	o.say("preflight: release %s verified against its lock (%d objects, lock %s)", dep.Version, dep.InventoryCount, dep.LockDigest)
	identity, err := o.identityStep(ctx, tgt.ClusterIdentity)
	if err != nil {
		return nil, err
	}
	o.say("preflight: cluster identity %s matches", tgt.ClusterIdentity)
	head, _, err := o.readHead(ctx, tgt.Namespace, tgt.ClusterIdentity)
	if err != nil {
		return nil, err
	}
	sup := supersedeIntent(head, req.Supersede)
	if err := CheckTransition(head, req.Expected, Target{Kind: req.Transition, Deployment: dep, Inventory: ld.release.Inventory, Supersedes: sup}); err != nil {
		return nil, err
	}
	if sup != nil {
		o.say("preflight: head generation %d is applying %s %s (preflight %s, mutation %s): %s to %s supersedes it",
			head.Generation, head.Transition.Kind, head.Current.Version, head.Transition.PreflightDigest, head.Transition.MutationID, req.Transition, dep.Version)
	} else {
		o.say("preflight: head %s allows %s to %s", req.Expected.describe(), req.Transition, dep.Version)
	}
	cmd, err := preflightCommand(req, ld, sup, head)
	if err != nil {
		return nil, err
	}
	if err := o.checkAccess(ctx, ld.release.Objects, tgt.Namespace, head != nil, nil); err != nil {
		return nil, err
	}
	proposer, err := o.preflightProposer(ctx, head, cmd)
	if err != nil {
		return nil, err
	}
	var retired []receipts.Retired
	if req.Transition == TransitionRetire {
		if retired, err = o.preflightRetired(ctx, head, ld); err != nil {
			return nil, err
		}
	}
	dry, err := o.preflightDryRun(ctx, ld, req, retired)
	if err != nil {
		return nil, err
	}
	rec := &PreflightRecord{
		Schema:     PreflightSchema,
		Command:    cmd,
		Release:    preflightRelease(dir, ld),
		Target:     tgt,
		Tool:       receipts.Tool{Name: ToolName, Version: o.ToolVersion, FieldManager: ld.lock.Tool.FieldManager},
		Steps:      PreflightSteps{Identity: identity, DryRun: dry.digest},
		DiffDigest: dry.diffDigest,
		Retired:    retired,
		Proposer:   proposer,
	}
	if err := o.checkHeadFits(head, ld, rec); err != nil {
		return nil, err
	}
	if req.thenApply { // its receipt's directory, before a record is left behind
		if err := checkReceiptsDir(o.receiptsDir(dir)); err != nil {
			return nil, err
		}
	}
	out, replayed, err := writePreflightRecord(req, rec)
	if err != nil {
		return nil, err
	}
	o.say("preflight: record %s written (preflight %s)", out, rec.SelfDigest)
	return &PreflightResult{Path: out, Replayed: replayed, Deferred: dry.deferred, Record: rec, loaded: ld}, nil
}

// preflightRetired checks that the objects a retire removes may be deleted
// and reads each one's UID and resourceVersion (the delete preconditions).
func (o *Options) preflightRetired(ctx context.Context, head *Head, ld *loaded) ([]receipts.Retired, error) {
	ids := Retired(head.Current.Inventory, ld.release.Inventory)
	if err := o.checkDeleteAccess(ctx, ids); err != nil {
		return nil, err
	}
	retired, err := o.readRetired(ctx, ids)
	if err != nil {
		return nil, err
	}
	for _, r := range retired {
		if r.UID == "" {
			o.say("preflight: retire %s: absent (already gone; it will not be deleted)", r.ID)
		} else {
			o.say("preflight: retire %s: uid %s resourceVersion %s", r.ID, r.UID, r.ResourceVersion)
		}
	}
	return retired, nil
}

// preflightDryRunResult is what preflight's dry-run step binds into the
// record.
type preflightDryRunResult struct {
	digest     string // the dry-run transcript's (with retired objects, and their deletes')
	deferred   int    // objects deferred until their namespace or CRD exists
	diffDigest string // preflight --diff's change list, else ""
}

// preflightDryRun is preflight step 4: the server-side dry-run of every
// object, of the deletes of the retired ones, and with --diff the change
// list computed from the dry-run's answers.
func (o *Options) preflightDryRun(ctx context.Context, ld *loaded, req PreflightRequest, retired []receipts.Retired) (preflightDryRunResult, error) {
	var r preflightDryRunResult
	dep, fm := ld.deployment(), ld.lock.Tool.FieldManager
	dry, deferred, dryObjs, err := o.dryRunAll(ctx, ld.release.Objects, fm, req.ForceConflicts, ld.target().Namespace, req.Diff != nil)
	if err != nil {
		return r, err
	}
	r.digest, r.deferred = dry, deferred
	o.say("preflight: server-side dry-run: %d ok, %d deferred until their namespace or CRD exists", dep.InventoryCount-deferred, deferred)
	if retired != nil {
		deletes, err := o.dryRunDeletes(ctx, retired)
		if err != nil {
			return r, err
		}
		if r.digest, err = transcriptDigest("retire-dry-run", map[string]any{"dryRun": dry, "delete": deletes}); err != nil {
			return r, err
		}
		o.say("preflight: delete dry-run with preconditions: %d retired object(s) ok", len(deletes))
	}
	if req.Diff != nil {
		if r.diffDigest, err = req.Diff(ctx, ld.release.Objects, dryObjs, fm, req.ForceConflicts); err != nil {
			return r, err
		}
	}
	return r, nil
}

// preflightCommand is the record's command: what was asked, of which
// release, on which cluster, under which approval policy.
func preflightCommand(req PreflightRequest, ld *loaded, sup *SupersedeIntent, head *Head) (Command, error) {
	policy, err := approvalPolicy(head, req.Approval)
	if err != nil {
		return Command{}, err
	}
	dep, tgt := ld.deployment(), ld.target()
	return Command{Supersedes: sup, Approval: policy,
		Transition: req.Transition, ExpectedHead: req.Expected, Version: dep.Version,
		LockDigest: dep.LockDigest, InventoryDigest: dep.InventoryDigest,
		ClusterIdentity: tgt.ClusterIdentity, Namespace: tgt.Namespace,
		FieldManager: ld.lock.Tool.FieldManager, ForceConflicts: req.ForceConflicts,
	}, nil
}

// supersedeIntent is what preflight --supersede generation binds: the
// transition the Head is applying when it is at that generation, else the
// bare generation (which CheckTransition then refuses); nil without
// --supersede.
func supersedeIntent(head *Head, generation int64) *SupersedeIntent {
	if generation == 0 {
		return nil
	}
	s := SupersedeIntent{Generation: generation}
	if head != nil && head.Generation == generation {
		s = supersedeIntentOf(head)
	}
	return &s
}

// preflightRelease is the record's release: the directory and the digests
// it was verified against.
func preflightRelease(dir string, ld *loaded) PreflightRelease {
	dep := ld.deployment()
	return PreflightRelease{
		Dir: dir, Version: dep.Version, LockDigest: dep.LockDigest,
		SourceDigest: ld.release.SourceDigest, RenderDigest: ld.release.RenderDigest,
		InventoryDigest: dep.InventoryDigest, InventoryCount: dep.InventoryCount,
	}
}

// writePreflightRecord seals rec and writes it to req.Out (by default a
// name from the generation, transition and version), never replacing a
// file: the same bytes already there are a replay.
func writePreflightRecord(req PreflightRequest, rec *PreflightRecord) (string, bool, error) {
	if err := rec.Seal(); err != nil {
		return "", false, err
	}
	data, err := rec.Bytes()
	if err != nil {
		return "", false, err
	}
	out := req.Out
	if out == "" {
		out = fmt.Sprintf("ql3-preflight-g%d-%s-%s.json", req.Expected.Generation+1, req.Transition, rec.Command.Version)
	}
	replayed, err := WriteNoReplace(out, append(data, '\n'))
	if err != nil {
		return "", false, fail.Wrap(fail.Invalid, fmt.Errorf("write preflight record: %w", err))
	}
	return out, replayed, nil
}
