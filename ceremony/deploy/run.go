package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"

	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/internal/crashpoint"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/safefile"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// ApplyRequest is `kubectl ql3 apply|resume --preflight FILE [DIR]`.
type ApplyRequest struct {
	Preflight *PreflightRecord
	Dir       string // default: the record's release.dir
	Resume    bool   // take over an applying Head with the same intent
	// LeaveChanged (resume --leave-changed) settles a retired object that
	// was changed after the preflight by leaving it on the cluster,
	// unmanaged, with the outcome "left: changed" instead of failing.
	LeaveChanged bool

	loaded *loaded // set by PreflightResult.ApplyRequest
}

// ApplyResult is the outcome of apply, resume or rollback.
type ApplyResult struct {
	Outcome      string `json:"outcome"` // committed | replayed | superseded (with a conflict error)
	Generation   int64  `json:"generation"`
	Version      string `json:"version"`
	Transition   string `json:"transition"`
	ExpectedHead string `json:"expectedHead"` // the token for the next preflight
	Receipt      string `json:"receipt"`
	ReceiptState string `json:"receiptState"` // written | replayed | rebuilt
	Note         string `json:"note,omitempty"`
	// Retired, on a retire, is each retired object with its outcome.
	Retired []receipts.Retired `json:"retired,omitempty"`
	Head    *Head              `json:"-"`
	receipt *receipts.Receipt  `json:"-"`
}

// RunApply is docs/ceremony.md §6 and, with Resume, §7.
func RunApply(ctx context.Context, o Options, req ApplyRequest) (*ApplyResult, error) {
	o.defaults()
	rec := req.Preflight
	ld, dir, err := o.loadPreflighted(req)
	if err != nil {
		return nil, err
	}
	rdir := o.receiptsDir(dir)
	tgt := ld.target()
	ns := tgt.Namespace
	if _, err := o.identityStep(ctx, tgt.ClusterIdentity); err != nil {
		return nil, err
	}
	head, ref, err := o.readHead(ctx, ns, tgt.ClusterIdentity)
	if err != nil {
		return nil, err
	}
	ours := head != nil && head.Transition.CommandDigest == rec.CommandDigest && head.Transition.PreflightDigest == rec.SelfDigest
	if res, done, err := o.settledBefore(ld, rdir, rec, head, ours, req.Resume); done {
		return res, err
	}
	if err := checkReceiptsDir(rdir); err != nil {
		return nil, err
	}
	applying, res, err := o.applyingHead(head, ld, rec, rdir, ours)
	if res != nil || err != nil {
		return res, err
	}
	if err := o.checkAccess(ctx, ld.release.Objects, ns, head != nil, &rbacDryRun{rec.Command.FieldManager, rec.Command.ForceConflicts}); err != nil {
		return nil, err
	}
	if err := o.checkDeleteAccess(ctx, retiredIDs(rec.Retired)); err != nil {
		return nil, err
	}
	if !ours {
		if applying.Approval, err = o.approvalGate(ctx, head, rec); err != nil {
			return nil, gateRefusal{err}
		}
		if applying.Approval != nil { // newApplyingHead sealed it without one
			if err := applying.Seal(); err != nil {
				return nil, err
			}
		}
	}
	if ref, err = o.writeHead(ctx, ns, ref, head, applying); err != nil {
		return nil, err
	}
	if ours {
		o.say("resume: took over generation %d (mutation %s)", applying.Generation, applying.Transition.MutationID)
	} else if ss := applying.Transition.Supersedes; ss != nil {
		s := ss[len(ss)-1]
		o.say("apply: acquired generation %d: %s to %s (mutation %s), superseding generation %d (%s %s, preflight %s, mutation %s) at %s",
			applying.Generation, rec.Command.Transition, applying.Current.Version, applying.Transition.MutationID, s.Generation, s.Kind, s.Version, s.PreflightDigest, s.MutationID, s.At)
	} else {
		o.say("apply: acquired generation %d: %s to %s (mutation %s)", applying.Generation, rec.Command.Transition, applying.Current.Version, applying.Transition.MutationID)
	}
	crashpoint.At("acquired")
	committed, err := o.applyAndConverge(ctx, ld, rec, req.LeaveChanged, applying)
	if err != nil {
		return nil, acquiredFailure{err}
	}
	crashpoint.At("before-commit")
	if _, err := o.writeHead(ctx, ns, ref, applying, committed); err != nil {
		return nil, acquiredFailure{err}
	}
	crashpoint.At("after-commit")
	o.say("commit: generation %d committed (%s %s)", committed.Generation, committed.Transition.Kind, committed.Current.Version)
	res, err = o.finish(committed, ld, rdir, "committed")
	if err != nil {
		return nil, acquiredFailure{err}
	}
	return res, nil
}

// acquiredFailure is an error of apply after it acquired the Head: the
// Head is applying (or committed) this preflight, so resume continues it.
type acquiredFailure struct{ error }

func (a acquiredFailure) Unwrap() error { return a.error }

// loadPreflighted renders the release directory (the record's, unless
// req.Dir names another; not again when req carries the release the
// preflight verified) and checks it is the release the preflight bound.
func (o *Options) loadPreflighted(req ApplyRequest) (*loaded, string, error) {
	rec := req.Preflight
	dir := req.Dir
	if dir == "" {
		dir = rec.Release.Dir
	}
	ld := req.loaded
	if ld == nil || dir != rec.Release.Dir {
		var err error
		if ld, err = o.load(dir); err != nil {
			return nil, "", err
		}
	}
	if err := checkAgainstPreflight(ld, rec); err != nil {
		return nil, "", err
	}
	return ld, dir, nil
}

// settledBefore decides, from the Head, whether this apply has nothing to
// write (done): the preflight is committed already (a replay), or the Head
// is applying it without resume (another apply), or resume finds the Head
// applying something else (unless an earlier run committed this preflight).
func (o *Options) settledBefore(ld *loaded, rdir string, rec *PreflightRecord, head *Head, ours, resume bool) (*ApplyResult, bool, error) {
	if s := supersededIn(head, rec); s != nil {
		return nil, true, fail.Errorf(fail.Conflict, "head: generation %d (this preflight, %s %s) was superseded by generation %d (%s %s, %s) at %s: it will never be resumed or committed; run `kubectl ql3 head` for the Head now",
			s.Generation, s.Kind, s.Version, head.Generation, head.Transition.Kind, head.Current.Version, head.Phase, s.At)
	}
	switch {
	case ours && head.Phase == PhaseCommitted:
		o.say("apply: preflight %s is already committed as generation %d: replay, no workload write", rec.SelfDigest, head.Generation)
		res, err := o.finish(head, ld, rdir, "replayed")
		return res, true, err
	case ours && !resume:
		return nil, true, fail.Errorf(fail.Conflict, "head: generation %d is applying this very preflight under mutation %s: another apply is running, or died; if none is running, run `kubectl ql3 resume --preflight FILE`", head.Generation, head.Transition.MutationID)
	case !ours && resume:
		if res, err := o.committedEarlier(rdir, rec, head); res != nil || err != nil {
			return res, true, err
		}
		what := "absent"
		if head != nil {
			what = fmt.Sprintf("generation %d %s (%s %s)", head.Generation, head.Phase, head.Transition.Kind, head.Current.Version)
		}
		return nil, true, fail.Errorf(fail.Conflict, "resume: the Head is %s, not applying this preflight (%s); resume only continues its own transition", what, rec.SelfDigest)
	}
	return nil, false, nil
}

// applyingHead is the applying Head this apply writes under a new mutation
// id: with ours (resume), the applying Head taken over; else a new
// generation, once the transition from head is allowed (when it is not, a
// receipt of an earlier run that committed this preflight is the result).
func (o *Options) applyingHead(head *Head, ld *loaded, rec *PreflightRecord, rdir string, ours bool) (*Head, *ApplyResult, error) {
	mutationID := newMutationID()
	if ours {
		applying := cloneHead(head)
		applying.Transition.MutationID = mutationID
		if err := applying.Seal(); err != nil {
			return nil, nil, err
		}
		return applying, nil, nil
	}
	if err := CheckTransition(head, rec.Command.ExpectedHead, Target{Kind: rec.Command.Transition, Deployment: ld.deployment(), Inventory: ld.release.Inventory, Supersedes: rec.Command.Supersedes}); err != nil {
		if res, cerr := o.committedEarlier(rdir, rec, head); res != nil || cerr != nil {
			return nil, res, cerr
		}
		return nil, nil, err
	}
	applying, err := o.newApplyingHead(head, ld, rec, mutationID)
	return applying, nil, err
}

// applyAndConverge is apply steps 4 to 6: server-side apply, the retire
// of the objects the release dropped, the convergence read and the final
// identity read. It returns the committed Head to write.
func (o *Options) applyAndConverge(ctx context.Context, ld *loaded, rec *PreflightRecord, leaveChanged bool, applying *Head) (*Head, error) {
	applied, err := o.applyAll(ctx, ld.release.Objects, rec.Command.FieldManager, rec.Command.ForceConflicts, applying)
	if err != nil {
		return nil, err
	}
	applyDigest, err := transcriptDigest("apply", applied)
	if err != nil {
		return nil, err
	}
	o.say("apply: %d object(s) server-side applied", len(applied))
	crashpoint.At("applied")
	var retired []receipts.Retired
	if rec.Retired != nil {
		if retired, err = o.retire(ctx, rec.Retired, leaveChanged); err != nil {
			return nil, err
		}
		crashpoint.At("retired")
	}
	convergeDigest, err := o.converge(ctx, applied, applying)
	if err != nil {
		return nil, err
	}
	o.say("converge: %d object(s) current", len(applied))
	finalIdentity, err := o.identityStep(ctx, ld.target().ClusterIdentity)
	if err != nil {
		return nil, err
	}
	committed := cloneHead(applying)
	committed.Phase = PhaseCommitted
	committed.Steps.Apply, committed.Steps.Converge, committed.Steps.FinalIdentity = applyDigest, convergeDigest, finalIdentity
	committed.Retired = retired
	if err := committed.Seal(); err != nil {
		return nil, err
	}
	return committed, nil
}

// checkReceiptsDir makes sure the receipt can be published before anything
// is written to the cluster: a receipts directory that is a file, or that
// cannot be created or written, would otherwise fail only after the commit.
func checkReceiptsDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail.Errorf(fail.Invalid, "receipts directory: %w", err)
	}
	f, err := os.CreateTemp(dir, receipts.TempPattern)
	if err != nil {
		return fail.Errorf(fail.Invalid, "receipts directory %q is not writable: %w", dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// checkAgainstPreflight re-verifies the release directory against the record.
func checkAgainstPreflight(ld *loaded, rec *PreflightRecord) error {
	got := PreflightRelease{
		Dir: rec.Release.Dir, Version: ld.lock.Release.Version, LockDigest: ld.lockDigest,
		SourceDigest: ld.release.SourceDigest, RenderDigest: ld.release.RenderDigest,
		InventoryDigest: ld.release.InventoryDigest, InventoryCount: len(ld.release.Inventory),
	}
	if got != rec.Release {
		return fail.Errorf(fail.Invalid, "release directory changed since the preflight: %s (%s): preflight again", rec.Release.changes(got), rec.Release.Dir)
	}
	if t := ld.target(); t != rec.Target {
		return fail.Errorf(fail.Invalid, "lock target %+v differs from the preflight's %+v", t, rec.Target)
	}
	if ld.lock.Tool.FieldManager != rec.Command.FieldManager {
		return fail.Errorf(fail.Invalid, "lock field manager %q differs from the preflight's %q", ld.lock.Tool.FieldManager, rec.Command.FieldManager)
	}
	return nil
}

// newApplyingHead builds generation N+1 in phase applying from the
// committed Head N (nil for install).
func (o *Options) newApplyingHead(prev *Head, ld *loaded, rec *PreflightRecord, mutationID string) (*Head, error) {
	h := &Head{
		Schema:     HeadSchema,
		Phase:      PhaseApplying,
		Generation: 1,
		Transition: HeadTransition{Transition: receipts.Transition{
			Kind: rec.Command.Transition, CommandDigest: rec.CommandDigest,
			PreflightDigest: rec.SelfDigest, ForceConflicts: rec.Command.ForceConflicts,
		}, MutationID: mutationID},
		Current: HeadDeployment{Deployment: ld.deployment(), Inventory: ld.release.Inventory},
		Target:  ld.target(),
		Tool:    receipts.Tool{Name: ToolName, Version: o.ToolVersion, FieldManager: rec.Command.FieldManager},
		Steps:   receipts.Steps{Identity: rec.Steps.Identity, DryRun: rec.Steps.DryRun},
		Retired: rec.Retired,
		// Approval is set by the gate just before the Head is acquired.
		ApprovalPolicy: rec.Command.Approval,
	}
	if prev != nil && rec.Command.Supersedes != nil {
		supersede(h, prev, time.Now())
		return h, h.Seal()
	}
	if prev != nil {
		prevReceipt, err := ReceiptFromHead(prev)
		if err != nil {
			return nil, err
		}
		d := prev.Current.Deployment
		h.Generation = prev.Generation + 1
		h.Previous = &d
		h.PreviousReceiptDigest = prevReceipt.SelfDigest
	}
	return h, h.Seal()
}

// supersede makes h, the applying Head of a transition that supersedes
// the applying Head stuck, its successor (docs/ceremony.md §7.5): generation
// stuck+1, previous and previousReceiptDigest the last committed
// deployment's, which stuck carries, and transition.supersedes stuck's own
// list followed by stuck's transition, superseded at `at`.
func supersede(h, stuck *Head, at time.Time) {
	prev := *stuck.Previous
	h.Generation = stuck.Generation + 1
	h.Previous = &prev
	h.PreviousReceiptDigest = stuck.PreviousReceiptDigest
	h.Transition.Supersedes = append(slices.Clone(stuck.Transition.Supersedes), receipts.Superseded{
		Generation: stuck.Generation, Kind: stuck.Transition.Kind, Version: stuck.Current.Version,
		CommandDigest: stuck.Transition.CommandDigest, PreflightDigest: stuck.Transition.PreflightDigest,
		MutationID: stuck.Transition.MutationID, At: at.UTC().Format(receipts.SupersededAtLayout),
	})
}

// supersededIn is the entry of head's supersedes that names rec's
// transition, if head superseded it.
func supersededIn(head *Head, rec *PreflightRecord) *receipts.Superseded {
	if head == nil {
		return nil
	}
	for i, s := range head.Transition.Supersedes {
		if s.CommandDigest == rec.CommandDigest && s.PreflightDigest == rec.SelfDigest {
			return &head.Transition.Supersedes[i]
		}
	}
	return nil
}

func cloneHead(h *Head) *Head {
	c := *h
	if h.Previous != nil {
		p := *h.Previous
		c.Previous = &p
	}
	return &c
}

// writeHead moves the Head from `from` (nil = absent, read at ref) to `to`
// by create or resourceVersion-carrying update through the CAS kernel,
// which settles every outcome from what the cluster holds (docs/ceremony.md
// §6.3): success is only ever "the Head now holds exactly `to`". An
// unknown outcome with nothing moved is resent (policy Resend).
func (o *Options) writeHead(ctx context.Context, ns string, ref *cmRef, from, to *Head) (*cmRef, error) {
	cm, err := to.ConfigMap(ns)
	if err != nil {
		return nil, err
	}
	if from != nil {
		cm.ResourceVersion = ref.resourceVersion
	}
	w := cas.Write[*corev1.ConfigMap]{
		Client:       o.Cluster.Heads(ns),
		What:         headWhat(ns),
		Desired:      cm,
		Create:       from == nil,
		FieldManager: HeadFieldManager,
		Policy:       cas.Resend,
		Say:          o.say,
		Validate: func(cur *corev1.ConfigMap, present bool) error {
			if !present {
				return nil
			}
			h, err := ParseHeadConfigMap(cur)
			if err == nil && h.Target.ClusterIdentity != to.Target.ClusterIdentity {
				return fail.Errorf(fail.Tamper, "head %s/%s: target.clusterIdentity %s names another cluster than this one (%s): investigate", ns, HeadName, h.Target.ClusterIdentity, to.Target.ClusterIdentity)
			}
			return err
		},
		Landed: func(cur *corev1.ConfigMap) bool {
			h, err := ParseHeadConfigMap(cur)
			return err == nil && h.SelfDigest == to.SelfDigest
		},
		Describe: func(cur *corev1.ConfigMap, present bool) string {
			if !present {
				return "the Head was removed"
			}
			h, err := ParseHeadConfigMap(cur)
			if err != nil {
				return err.Error()
			}
			return fmt.Sprintf("the Head is now generation %d %s (%s %s, mutation %s)", h.Generation, h.Phase, h.Transition.Kind, h.Current.Version, h.Transition.MutationID)
		},
		Refused: func(op cas.Op, err error) error {
			switch {
			case op == cas.OpCreate && apierrors.IsNotFound(err):
				return missingControlNamespace(ns)
			case op == cas.OpUpdate && apierrors.IsNotFound(err):
				return fail.Errorf(fail.Conflict, "head: the Head was removed by someone else (%v): nothing of ours was written after that; investigate before deploying again", err)
			}
			return nil
		},
	}
	res, err := writeUnderHeadPolicy(ctx, o.say, to, w.Do)
	if err != nil {
		return nil, err
	}
	return &cmRef{resourceVersion: res.Object.ResourceVersion}, nil
}

// headPolicyLag bounds how long a Head write naming an approval is resent
// while the Head policy denies it for its parameter: the API server reads
// the approval object from an informer cache that can lag the decision
// just written by a moment.
var headPolicyLag = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 1.5, Steps: 8}

// writeUnderHeadPolicy runs do, and again while the Head policy denies a
// Head naming an approval (gate.MsgHeadParams) within headPolicyLag: a
// denied write stored nothing, so sending it again is safe; any other
// outcome is do's.
func writeUnderHeadPolicy[T any](ctx context.Context, say func(string, ...any), to *Head, do func(context.Context) (T, error)) (T, error) {
	var res T
	tries := 0
	err := retry.OnError(headPolicyLag, func(err error) bool {
		return to.Approval != nil && gate.IsHeadDenial(err, gate.MsgHeadParams) && ctx.Err() == nil
	}, func() error {
		if tries++; tries > 1 {
			say("head: the API server's Head policy did not yet see approval uid %s as approved (its cache lags the decision by a moment): writing again", to.Approval.UID)
		}
		var err error
		res, err = do(ctx)
		return err
	})
	return res, err
}

// committedEarlier recognises a rerun whose preflight was committed and
// whose Head has moved past it since: a receipt for it is present locally.
// The receipt proves the past commit, not the present: the Head is at
// another generation (or was removed), so this is never a success but
// conflict, outcome "superseded", with the result saying what is known.
// Only files named like receipts are read, each through the one hardened
// open (safefile.ReadRegular, receipts.MaxFileSize): one that is not a
// regular file (a named pipe) is invalid input, refused naming it, never
// waited on; without a result, the error is the only outcome.
func (o *Options) committedEarlier(rdir string, rec *PreflightRecord, head *Head) (*ApplyResult, error) {
	entries, err := os.ReadDir(rdir)
	if err != nil {
		return nil, nil
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), receipts.FileSuffix) {
			continue
		}
		data, err := safefile.ReadRegular(filepath.Join(rdir, e.Name()), receipts.MaxFileSize)
		if errors.Is(err, safefile.ErrNotRegular) {
			return nil, fail.Errorf(fail.Invalid, "receipts directory: %w; a receipt must be a regular file: remove it (nothing was written)", err)
		}
		if err != nil {
			continue
		}
		r, err := receipts.Parse(data)
		if err != nil || r.Transition.PreflightDigest != rec.SelfDigest || r.Transition.CommandDigest != rec.CommandDigest {
			continue
		}
		now := "the Head has since been removed"
		if head != nil {
			now = fmt.Sprintf("the Head is now at generation %d %s (%s %s)", head.Generation, head.Phase, head.Transition.Kind, head.Current.Version)
		}
		note := fmt.Sprintf("superseded: this preflight was committed as generation %d (receipt %s); %s", r.Generation, e.Name(), now)
		o.say("apply: %s", note)
		res := &ApplyResult{Outcome: "superseded", Generation: r.Generation, Version: r.Deployment.Version, Transition: r.Transition.Kind,
			ExpectedHead: head.Expected().String(), Receipt: filepath.Join(rdir, e.Name()), ReceiptState: "present", Note: note}
		return res, fail.Errorf(fail.Conflict, "%s: nothing was written; run `kubectl ql3 head` and preflight again from there", note)
	}
	return nil, nil
}

// finish publishes (or verifies, or rebuilds) the receipt of a committed
// Head, whose release ld is (with a signing key, its attestation states it).
func (o *Options) finish(h *Head, ld *loaded, rdir, outcome string) (*ApplyResult, error) {
	r, err := ReceiptFromHead(h)
	if err != nil {
		return nil, err
	}
	var rel *receipts.Rendered
	if o.SignKey != nil {
		if rel, err = RenderedOf(ld.release); err != nil {
			return nil, fmt.Errorf("receipt attestation: %w", err)
		}
	}
	pub, err := receipts.Publish(rdir, r, o.SignKey, rel)
	if err != nil {
		return nil, fmt.Errorf("receipt: %w", err)
	}
	state := "written"
	switch {
	case pub.Replayed && outcome == "replayed":
		state = "replayed"
	case !pub.Replayed && outcome == "replayed":
		state = "rebuilt"
	}
	o.say("receipt: %s %s (%s)", pub.Path, state, r.SelfDigest)
	return &ApplyResult{Outcome: outcome, Generation: h.Generation, Version: h.Current.Version, Transition: h.Transition.Kind,
		ExpectedHead: h.Expected().String(), Receipt: pub.Path, ReceiptState: state, Retired: h.Retired, Head: h, receipt: r}, nil
}
