package views

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// Object states of kubectl ql3 status, worst first.
const (
	StateMissing    = "missing"     // the object is gone (never recreated here)
	StateDrifted    = "drifted"     // another field manager owns fields the deployer applied; with the release, a value differs from the release's
	StateCoOwned    = "co-owned"    // another field manager owns fields the deployer owns too: a release that changes them conflicts
	StateNotCurrent = "not-current" // kstatus says the object is not Current
	StateInSync     = "in-sync"
)

// FieldDrift is one field another manager now owns.
type FieldDrift struct {
	Field       string `json:"field"`
	Manager     string `json:"manager"`
	Operation   string `json:"operation"`
	Subresource string `json:"subresource,omitempty"`
	Time        string `json:"time,omitempty"`
}

// ObjectStatus is one inventory object's row.
type ObjectStatus struct {
	Object  inventory.Identity `json:"object"`
	State   string             `json:"state"`
	Status  string             `json:"status,omitempty"` // kstatus, when present
	Message string             `json:"message,omitempty"`
	Drift   []FieldDrift       `json:"drift,omitempty"`
	// CoOwned are fields the deployer owns that another manager owns as
	// well (see CoOwned): the next preflight conflicts on each one whose
	// value its release changes.
	CoOwned []FieldDrift `json:"coOwned,omitempty"`
	// Removed are fields the release sets that the live object lacks,
	// and Changed the fields whose live value is not the release's (see
	// Values), whoever wrote them; only when the release was given.
	Removed []string `json:"removed,omitempty"`
	Changed []string `json:"changed,omitempty"`
}

// Applying describes a Head left applying: who holds it and what resume
// would do.
type Applying struct {
	MutationID      string `json:"mutationId"`
	Transition      string `json:"transition"`
	Version         string `json:"version"`
	PreflightDigest string `json:"preflightDigest"`
	Since           string `json:"since,omitempty"` // the Head's last write, from its managedFields
	Resume          string `json:"resume"`
}

// StatusReport is what `kubectl ql3 status` prints.
type StatusReport struct {
	Namespace    string    `json:"namespace"`
	Generation   int64     `json:"generation"`
	Phase        string    `json:"phase"`
	Transition   string    `json:"transition"`
	Version      string    `json:"version"`
	FieldManager string    `json:"fieldManager"`
	Applying     *Applying `json:"applying,omitempty"`
	InSync       bool      `json:"inSync"`
	Missing      int       `json:"missing"`
	Drifted      int       `json:"drifted"`
	CoOwned      int       `json:"coOwned"`
	NotCurrent   int       `json:"notCurrent"`
	// ValuesCompared says whether the release the Head deployed was given
	// and each object's values compared with it (Values). NotSeen, when
	// they were not, says what status cannot see without it and what to
	// run instead.
	ValuesCompared bool           `json:"valuesCompared"`
	NotSeen        string         `json:"notSeen,omitempty"`
	Objects        []ObjectStatus `json:"objects"`
	// HeadWriters are the field managers owning head.json: kubectl-ql3's
	// alone unless someone wrote the Head outside the tool.
	HeadWriters []FieldDrift `json:"headWriters"`
	// Approval is the two-person rule at the Head, when it is on or this
	// generation was applied under an approval (docs/approval.md §9).
	Approval *ApprovalStatus `json:"approval,omitempty"`
	// Bypass is the evidence that this Head was moved outside kubectl-ql3
	// (so no approval gated the move): tamper, exit 5.
	Bypass []string `json:"bypass,omitempty"`
}

// Applied is the release the Head deployed, for Status to compare the live
// objects with: its lock digest (checked against the Head's) and its
// rendered objects.
type Applied struct {
	LockDigest string
	Objects    []*unstructured.Unstructured
}

// Err is the exit class of the report (docs/guide-views.md, "kubectl ql3 status"):
// tamper (5) first when the Head was moved outside the tool (Bypass); nil when the Head is committed and every object is present, in sync and
// Current; conflict (3) when an object is missing, drifted or co-owned or
// the Head is left applying; unavailable (4) when the only finding is
// objects not yet Current (retry later).
func (r *StatusReport) Err() error {
	switch {
	case len(r.Bypass) > 0:
		return fail.Errorf(fail.Tamper, "status %s: the Head was moved outside kubectl-ql3: %s; investigate (the API server's audit log says who; kubectl ql3 history DIR -n %s checks the receipt chain) and do not deploy on top of it until it is explained", r.Namespace, strings.Join(r.Bypass, "; "), r.Namespace)
	case r.Applying != nil:
		// First: objects of an applying transition not yet applied show as
		// missing, and what to do is resume, not investigate drift.
		return fail.Errorf(fail.Conflict, "status %s: the Head is applying generation %d under mutation %s: %s", r.Namespace, r.Generation, r.Applying.MutationID, r.Applying.Resume)
	case r.Missing > 0 || r.Drifted > 0:
		return fail.Errorf(fail.Conflict, "status %s: %d missing, %d drifted, %d co-owned, %d not Current of %d objects: investigate before the next preflight (its dry-run reports a field another manager owns as a conflict, --force-conflicts takes it over; a value changed under the deployer's own field manager name the next apply sets back without a word)", r.Namespace, r.Missing, r.Drifted, r.CoOwned, r.NotCurrent, len(r.Objects))
	case r.CoOwned > 0:
		return fail.Errorf(fail.Conflict, "status %s: %d of %d objects co-owned: another field manager owns fields the deployer set, and the next preflight conflicts on each one whose value its release changes (`kubectl ql3 diff DIR` dry-runs that release and names them; --force-conflicts takes them over, or have that manager give them up)", r.Namespace, r.CoOwned, len(r.Objects))
	case r.NotCurrent > 0:
		return fail.Errorf(fail.Unavailable, "status %s: %d of %d objects are not Current yet: retry later", r.Namespace, r.NotCurrent, len(r.Objects))
	}
	return nil
}

// Status reads the committed (or applying) Head of namespace ns and GETs
// every object of its inventory (no LIST): present, missing, drifted (by
// managedFields, see Drift; with applied, also every value that is not the
// release's, whoever wrote it: each present object is dry-run as diff does
// and compared, see Values) and kstatus. It writes nothing. No Head is
// invalid input; a tampered Head is tamper (5), as kubectl ql3 head;
// applied of another deployment than the Head's is invalid input.
func Status(ctx context.Context, c deploy.Cluster, ns string, parallelism int, applied *Applied) (*StatusReport, error) {
	if parallelism <= 0 {
		parallelism = 16
	}
	cm, h, err := readStatusHead(ctx, c, ns)
	if err != nil {
		return nil, err
	}
	byKey, err := appliedObjects(applied, h)
	if err != nil {
		return nil, err
	}
	rep := &StatusReport{
		Namespace: ns, Generation: h.Generation, Phase: h.Phase, Transition: h.Transition.Kind,
		Version: h.Current.Version, FieldManager: h.Tool.FieldManager, ValuesCompared: applied != nil,
	}
	if applied == nil {
		rep.NotSeen = notSeen(ns, h)
	}
	if h.Phase == deploy.PhaseApplying {
		rep.Applying = applyingOf(cm, h)
	}
	if rep.HeadWriters, err = headWriters(cm); err != nil {
		return nil, err
	}
	rep.Bypass = headBypass(rep.HeadWriters)
	approval, mismatch, err := approvalStatus(ctx, c, ns, cm, h)
	if err != nil {
		return nil, err
	}
	rep.Approval, rep.Bypass = approval, append(rep.Bypass, mismatch...)
	if rep.Objects, err = objectStatuses(ctx, c, ns, h, byKey, parallelism); err != nil {
		return nil, err
	}
	for _, o := range rep.Objects {
		switch o.State {
		case StateMissing:
			rep.Missing++
		case StateDrifted:
			rep.Drifted++
		case StateCoOwned:
			rep.CoOwned++
		}
		if o.Status != "" && o.Status != status.CurrentStatus.String() {
			rep.NotCurrent++
		}
	}
	rep.InSync = rep.Missing+rep.Drifted+rep.CoOwned+rep.NotCurrent == 0 && rep.Applying == nil && len(rep.Bypass) == 0
	return rep, nil
}

// notSeen is what status cannot see without the release: managedFields
// name a writer only by the field manager name it sent, which anyone may
// send.
func notSeen(ns string, h *deploy.Head) string {
	return fmt.Sprintf("values not compared: a change written under the deployer's field manager name (%s) or the Head's (%s) looks like the deployer's own, and a field another client removed leaves no trace; to see both, run `kubectl ql3 status -n %s --release DIR` (or `kubectl ql3 diff DIR`) with DIR the release the Head deployed (%s, lock %s)",
		h.Tool.FieldManager, deploy.HeadFieldManager, ns, h.Current.Version, h.Current.LockDigest)
}

// readStatusHead reads and parses the Head of namespace ns and checks it
// names the cluster it was read from.
func readStatusHead(ctx context.Context, c deploy.Cluster, ns string) (*corev1.ConfigMap, *deploy.Head, error) {
	what := "head " + ns + "/" + deploy.HeadName
	cm, present, err := cas.Read(ctx, c.Heads(ns), deploy.HeadName, what)
	if err != nil {
		return nil, nil, err
	}
	if !present {
		return nil, nil, fail.Errorf(fail.Invalid, "%s: absent: nothing is deployed in namespace %q (wrong -n?)", what, ns)
	}
	h, err := deploy.ParseHeadConfigMap(cm)
	if err != nil {
		return nil, nil, err
	}
	id, err := deploy.ReadClusterIdentity(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	if h.Target.ClusterIdentity != id {
		return nil, nil, fail.Errorf(fail.Tamper, "%s: target.clusterIdentity %s names another cluster than the one it was read from (%s): a Head copied between clusters is never trusted; investigate", what, h.Target.ClusterIdentity, id)
	}
	return cm, h, nil
}

// applyingOf describes the transition an applying Head h (read as cm) is
// in, since when, and what resume would do.
func applyingOf(cm *corev1.ConfigMap, h *deploy.Head) *Applying {
	a := &Applying{
		MutationID: h.Transition.MutationID, Transition: h.Transition.Kind, Version: h.Current.Version,
		PreflightDigest: h.Transition.PreflightDigest,
		Resume: fmt.Sprintf("resume would take generation %d over under a new mutation id, re-apply its %d objects (%s %s) with field manager %s, converge and commit; run `kubectl ql3 resume --preflight FILE` with the preflight record whose selfDigest is %s, once no apply is running",
			h.Generation, h.Current.InventoryCount, h.Transition.Kind, h.Current.Version, h.Tool.FieldManager, h.Transition.PreflightDigest),
	}
	for _, mf := range cm.ManagedFields {
		if mf.Manager == deploy.HeadFieldManager && mf.Time != nil {
			a.Since = mf.Time.UTC().Format(time.RFC3339)
		}
	}
	return a
}

// objectStatuses GETs every object of h's inventory, at most parallelism
// at once, in inventory order. Every object that could not be read is
// reported, classified: invalid input if one is, else unavailable.
func objectStatuses(ctx context.Context, c deploy.Cluster, ns string, h *deploy.Head, byKey map[inventory.Key]*unstructured.Unstructured, parallelism int) ([]ObjectStatus, error) {
	objs := make([]ObjectStatus, len(h.Current.Inventory))
	errs := make([]error, len(h.Current.Inventory))
	var g errgroup.Group
	g.SetLimit(parallelism)
	for i, oid := range h.Current.Inventory {
		g.Go(func() error {
			objs[i], errs[i] = objectStatus(ctx, c, oid, h.Tool.FieldManager, byKey[oid.Key()])
			return nil
		})
	}
	_ = g.Wait() // every object's error is kept in errs, all reported below
	var failed []error
	for i, err := range errs {
		if err != nil {
			failed = append(failed, cas.Classify(cas.OpRead, h.Current.Inventory[i].String(), err))
		}
	}
	if len(failed) > 0 {
		class := fail.Unavailable
		for _, err := range failed {
			if fail.ClassOf(err) == fail.Invalid {
				class = fail.Invalid
			}
		}
		return nil, fail.Errorf(class, "status %s: %d of %d objects could not be read: %v", ns, len(failed), len(errs), failed)
	}
	return objs, nil
}

// appliedObjects indexes applied's objects by key, after checking that
// they are the Head's deployment: the same lock, and every object of the
// Head's inventory among them.
func appliedObjects(applied *Applied, h *deploy.Head) (map[inventory.Key]*unstructured.Unstructured, error) {
	if applied == nil {
		return nil, nil
	}
	if applied.LockDigest != h.Current.LockDigest {
		return nil, fail.Errorf(fail.Invalid, "--release: its lock %s is not the lock %s of the Head's deployment (generation %d, %s %s): give the release directory the Head deployed", applied.LockDigest, h.Current.LockDigest, h.Generation, h.Transition.Kind, h.Current.Version)
	}
	out := make(map[inventory.Key]*unstructured.Unstructured, len(applied.Objects))
	for _, u := range applied.Objects {
		out[inventory.Identity{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}.Key()] = u
	}
	for _, id := range h.Current.Inventory {
		if out[id.Key()] == nil {
			return nil, fail.Errorf(fail.Invalid, "--release: %s of the Head's inventory is not in the release", id)
		}
	}
	return out, nil
}

func objectStatus(ctx context.Context, c deploy.Cluster, id inventory.Identity, fm string, applied *unstructured.Unstructured) (ObjectStatus, error) {
	st := ObjectStatus{Object: id}
	u, err := c.Get(ctx, id)
	if apierrors.IsNotFound(err) {
		st.State, st.Message = StateMissing, "deleted by someone: not recreated (the next upgrade or rollback applies it again)"
		return st, nil
	}
	if err != nil {
		return st, err
	}
	res, err := status.Compute(u)
	if err != nil {
		return st, fail.Errorf(fail.Invalid, "%s: kstatus: %v", id, err)
	}
	st.Status, st.Message = res.Status.String(), res.Message
	if st.Drift, err = Drift(u, fm); err != nil {
		return st, fmt.Errorf("%s: managedFields: %w", id, err)
	}
	if st.CoOwned, err = CoOwned(u, fm); err != nil {
		return st, fmt.Errorf("%s: managedFields: %w", id, err)
	}
	if applied != nil {
		// The release's values as the server would set them: the dry-run
		// diff makes, forced (a field another manager owns is compared, not
		// a conflict). It writes nothing.
		after, err := c.Apply(ctx, applied, fm, true, true)
		if err != nil {
			return st, fmt.Errorf("status --release compares the release's values through the server-side apply dry-run kubectl ql3 diff makes, which needs get and patch on the object (kubectl ql3 rbac DIR grants them): %w", err)
		}
		if st.Removed, st.Changed, err = Values(id, after, u); err != nil {
			return st, err
		}
	}
	switch {
	case len(st.Drift) > 0 || len(st.Removed) > 0 || len(st.Changed) > 0:
		st.State = StateDrifted
	case len(st.CoOwned) > 0:
		st.State = StateCoOwned
	case res.Status != status.CurrentStatus:
		st.State = StateNotCurrent
	default:
		st.State = StateInSync
	}
	return st, nil
}

// Drift lists the fields of u owned by a field manager other than fm (the
// deployer's) and other than the Head's, that fm does not own as well
// (a field both own has the deployer's value), excluding:
//   - managedFields entries of the status subresource, and fields under .status;
//   - fields under .metadata other than .metadata.labels and .metadata.annotations;
//   - labels and annotations whose key prefix is a Kubernetes domain
//     (kubernetes.io/, *.kubernetes.io/, k8s.io/, *.k8s.io/): Kubernetes
//     itself writes them (kubernetes.io/metadata.name on a Namespace,
//     deployment.kubernetes.io/revision on a Deployment).
//
// Server-side apply moves a field's ownership to whoever last set it to
// another value, so a field the deployer applied and someone else has
// changed since (kubectl edit, kubectl scale, another applier with
// --force-conflicts) shows up here; so does a field someone else added.
// The list is sorted by field, then manager.
func Drift(u *unstructured.Unstructured, fm string) ([]FieldDrift, error) {
	return othersFields(u, fm, false)
}

// CoOwned lists the fields of u that fm (the deployer) owns and that
// another field manager owns as well, with Drift's exclusions: a field
// both own has the deployer's value now, but a server-side apply by fm
// that changes its value (the next release's) without force conflicts
// with that manager. A manager comes to co-own a field by applying the
// same value (with or without --force-conflicts), or by an update that
// leaves ownership shared (before-first-apply, after a client-side
// apply). The list is sorted by field, then manager.
func CoOwned(u *unstructured.Unstructured, fm string) ([]FieldDrift, error) {
	return othersFields(u, fm, true)
}

// othersFields lists the fields managers other than fm and the Head's own
// hold in u, less Drift's exclusions: those fm owns as well (shared) or
// those it does not (!shared).
func othersFields(u *unstructured.Unstructured, fm string, shared bool) ([]FieldDrift, error) {
	ours := map[string]bool{}
	mfs := u.GetManagedFields()
	for _, mf := range mfs {
		if mf.Manager != fm || mf.FieldsV1 == nil || mf.Subresource == "status" {
			continue
		}
		paths, err := OwnedFields(mf.FieldsV1.Raw)
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			ours[p] = true
		}
	}
	var out []FieldDrift
	for _, mf := range mfs {
		if mf.Manager == fm || mf.Manager == deploy.HeadFieldManager || mf.Subresource == "status" || mf.FieldsV1 == nil {
			continue
		}
		paths, err := OwnedFields(mf.FieldsV1.Raw)
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			if ours[p] != shared || !driftRelevant(p) {
				continue
			}
			out = append(out, fieldOf(mf, p))
		}
	}
	slices.SortFunc(out, func(a, b FieldDrift) int {
		if c := strings.Compare(a.Field, b.Field); c != 0 {
			return c
		}
		return strings.Compare(a.Manager, b.Manager)
	})
	return out, nil
}

// fieldOf is field p as the managedFields entry mf owns it.
func fieldOf(mf metav1.ManagedFieldsEntry, p string) FieldDrift {
	d := FieldDrift{Field: p, Manager: mf.Manager, Operation: string(mf.Operation), Subresource: mf.Subresource}
	if mf.Time != nil {
		d.Time = mf.Time.UTC().Format(time.RFC3339)
	}
	return d
}

// driftRelevant is the path filter of Drift.
func driftRelevant(p string) bool {
	switch {
	case p == ".status" || strings.HasPrefix(p, ".status.") || strings.HasPrefix(p, ".status["):
		return false
	case strings.HasPrefix(p, ".metadata.labels."):
		return !isKubernetesDomain(strings.TrimPrefix(p, ".metadata.labels."))
	case strings.HasPrefix(p, ".metadata.annotations."):
		return !isKubernetesDomain(strings.TrimPrefix(p, ".metadata.annotations."))
	case p == ".metadata" || strings.HasPrefix(p, ".metadata.") || strings.HasPrefix(p, ".metadata["):
		return false
	}
	return true
}

// isKubernetesDomain reports whether an annotation key's prefix is a
// Kubernetes domain (kubernetes.io, k8s.io, or a subdomain of either).
func isKubernetesDomain(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	for _, d := range []string{"kubernetes.io", "k8s.io"} {
		if prefix == d || strings.HasSuffix(prefix, "."+d) {
			return true
		}
	}
	return false
}
