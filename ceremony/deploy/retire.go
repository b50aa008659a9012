package deploy

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// Retirement (docs/ceremony.md §11): the retired set's UIDs and
// resourceVersions are read at preflight and bound by the preflight
// digest; apply deletes exactly those objects in exactly those states
// (cas.Delete), so nothing changed or recreated since is ever removed.

const waitGoneEvery = 250 * time.Millisecond

// checkRetiredList checks a retired list as a preflight record (pending)
// or a Head carries it: present exactly on a retire, sorted and unique by
// identity. Pending entries all say "pending"; committed ones carry a
// receipt's final outcomes.
func checkRetiredList(kind string, pending bool, rs []receipts.Retired) error {
	if !pending {
		return receipts.CheckRetired(kind, rs)
	}
	if kind != TransitionRetire {
		if rs != nil {
			return fmt.Errorf("retired: set on a %s", kind)
		}
		return nil
	}
	if len(rs) == 0 {
		return fmt.Errorf("retired: missing or empty on a retire")
	}
	for i, r := range rs {
		if r.Outcome != receipts.OutcomePending {
			return fmt.Errorf("retired[%d].outcome: %q before the apply committed, want %q", i, r.Outcome, receipts.OutcomePending)
		}
		if (r.UID == "") != (r.ResourceVersion == "") {
			return fmt.Errorf("retired[%d]: uid and resourceVersion must both be set, or both empty (absent at preflight)", i)
		}
		if err := receipts.CheckReviewedDigest(r); err != nil {
			return fmt.Errorf("retired[%d].reviewedDigest: %v", i, err)
		}
	}
	if err := inventory.CheckSortedUnique(retiredIDs(rs)); err != nil {
		return fmt.Errorf("retired: %v", err)
	}
	return nil
}

// readRetired reads each retired object as preflight records it: UID and
// resourceVersion, or both empty when the object (or its kind) is gone.
func (o *Options) readRetired(ctx context.Context, ids []inventory.Identity) ([]receipts.Retired, error) {
	out := make([]receipts.Retired, 0, len(ids))
	for _, id := range ids {
		r := receipts.Retired{ID: id, Outcome: receipts.OutcomePending}
		u, err := o.Cluster.Get(ctx, id)
		switch {
		case err == nil:
			r.UID, r.ResourceVersion = string(u.GetUID()), u.GetResourceVersion()
			if u.GetDeletionTimestamp() != nil {
				return nil, fail.Errorf(fail.Conflict, "retire: %s is already being deleted by someone else (uid %s): wait until it is gone, then preflight again", id, r.UID)
			}
			if r.ReviewedDigest, err = ReviewedDigest(u); err != nil {
				return nil, fmt.Errorf("retire: %s: %w", id, err)
			}
		case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		default:
			return nil, cas.Classify(cas.OpRead, "read "+id.String(), err)
		}
		out = append(out, r)
	}
	return out, nil
}

// reviewedDrop are the members ReviewedDigest leaves out: what the API
// server and controllers change while nobody changes the object.
var reviewedDrop = [][]string{{"status"}, {"metadata", "resourceVersion"}, {"metadata", "managedFields"}, {"metadata", "generation"}}

// ReviewedDigest is the digest of an object as read from the API server,
// less status, metadata.resourceVersion, metadata.managedFields and
// metadata.generation: what a retire's preflight reviewed, and what must be
// unchanged for apply to delete it (docs/ceremony.md §11.2).
func ReviewedDigest(u *unstructured.Unstructured) (string, error) {
	c := u.DeepCopy()
	for _, f := range reviewedDrop {
		unstructured.RemoveNestedField(c.Object, f...)
	}
	return inventory.DigestOf(inventory.DomainRetiredObject, c.Object)
}

// unchangedSince judges a later read of a retired object by the digest
// its preflight recorded (nil for records written before the digest: then
// any other resourceVersion is a change).
func unchangedSince(digest string) func(metav1.Object) bool {
	if digest == "" {
		return nil
	}
	return func(cur metav1.Object) bool {
		u, ok := cur.(*unstructured.Unstructured)
		if !ok {
			return false
		}
		d, err := ReviewedDigest(u)
		return err == nil && d == digest
	}
}

// deleteOf is the fenced delete of one recorded object.
func (o *Options) deleteOf(r receipts.Retired, dryRun bool) *cas.Delete {
	id := r.ID
	return &cas.Delete{
		What: id.String(), UID: r.UID, ResourceVersion: r.ResourceVersion, DryRun: dryRun, Say: o.say,
		Unchanged: unchangedSince(r.ReviewedDigest),
		Send:      func(ctx context.Context, opts metav1.DeleteOptions) error { return o.Cluster.Delete(ctx, id, opts) },
		Get: func(ctx context.Context) (metav1.Object, error) {
			u, err := o.Cluster.Get(ctx, id)
			if meta.IsNoMatchError(err) {
				return nil, apierrors.NewNotFound(schema.GroupResource{Group: id.GroupKind().Group, Resource: id.Kind}, id.Name)
			}
			if err != nil {
				return nil, err
			}
			return u, nil
		},
	}
}

// dryRunDeletes sends each present retired object's fenced delete with
// dryRun=All and returns the transcript entries. Any outcome other than
// "would delete" means the object moved during the preflight.
func (o *Options) dryRunDeletes(ctx context.Context, rs []receipts.Retired) ([]objectResult, error) {
	var out []objectResult
	for _, r := range rs {
		if r.UID == "" {
			out = append(out, objectResult{ID: r.ID, Result: "absent"})
			continue
		}
		res, err := o.deleteOf(r, true).Do(ctx)
		if err != nil {
			return nil, err
		}
		if res != cas.Deleted {
			return nil, fail.Errorf(fail.Conflict, "retire: %s moved during the preflight (%s): preflight again", r.ID, res)
		}
		out = append(out, objectResult{ID: r.ID, Result: dryRunOK, UID: r.UID})
	}
	return out, nil
}

// deleteOrder is the order apply deletes in: every object other than
// Namespaces and CRDs first, then those (reverse stage order), each group
// in reverse inventory order.
func deleteOrder(rs []receipts.Retired) []int {
	var rest, first []int
	for i := len(rs) - 1; i >= 0; i-- {
		k := rs[i].ID.Key()
		if (k.Group == "" && k.Kind == "Namespace") || (k.Group == crdGroup && k.Kind == "CustomResourceDefinition") {
			first = append(first, i)
		} else {
			rest = append(rest, i)
		}
	}
	return append(rest, first...)
}

// retire deletes the pending retired objects of rs in delete order and
// waits until each deleted one is gone, bounded by o.Timeout. It returns
// the list with final outcomes. A changed object stops it (conflict)
// unless leaveChanged, which records "left: changed" and deletes nothing.
func (o *Options) retire(ctx context.Context, rs []receipts.Retired, leaveChanged bool) ([]receipts.Retired, error) {
	out := slices.Clone(rs)
	wctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	for _, i := range deleteOrder(out) {
		r := &out[i]
		if r.UID == "" {
			// Absent at preflight: never deleted (no UID to fence with).
			outcome, err := o.stillAbsent(ctx, r.ID)
			if err != nil {
				return nil, err
			}
			r.Outcome = outcome
			continue
		}
		res, err := o.deleteOf(*r, false).Do(ctx)
		switch {
		case err != nil && fail.Is(err, fail.Conflict) && leaveChanged:
			o.say("retire: %s changed since the preflight: left on the cluster, unmanaged (--leave-changed): %v", r.ID, err)
			r.Outcome = receipts.OutcomeLeftChanged
			continue
		case err != nil && fail.Is(err, fail.Conflict):
			return nil, fail.Errorf(fail.Conflict, "%v; nothing further was deleted and the Head stays applying: restore the object and run `kubectl ql3 resume --preflight FILE`, or keep it, unmanaged, with `kubectl ql3 resume --preflight FILE --leave-changed`", err)
		case err != nil:
			return nil, err
		}
		switch res {
		case cas.Deleted:
			r.Outcome = receipts.OutcomeDeleted
			o.say("retire: %s deleted (uid %s, resourceVersion %s); waiting until it is gone", r.ID, r.UID, r.ResourceVersion)
			d := o.deleteOf(*r, false)
			if err := cas.WaitGone(wctx, r.UID, d.Get, waitGoneEvery); err != nil {
				if wctx.Err() != nil {
					return nil, fail.Errorf(fail.Unavailable, "retire: %s is still present after --timeout %s (finalizers %v): the Head stays applying; once it is gone run `kubectl ql3 resume --preflight FILE`", r.ID, o.Timeout, o.finalizers(ctx, r.ID))
				}
				return nil, err
			}
		case cas.AlreadyAbsent:
			r.Outcome = receipts.OutcomeAlreadyAbsent
			o.say("retire: %s already absent", r.ID)
		case cas.Recreated:
			r.Outcome = receipts.OutcomeLeftRecreated
			o.say("retire: %s was deleted and recreated by someone else (not uid %s): the new object is left alone, unmanaged", r.ID, r.UID)
		}
	}
	return out, nil
}

// stillAbsent is the outcome of an object absent at preflight: already
// absent only when the API server answers 404 (or its kind is not served),
// left: recreated when the name holds an object now. Any other answer
// (403, 5xx, no answer) proves neither: classified, and nothing recorded.
func (o *Options) stillAbsent(ctx context.Context, id inventory.Identity) (string, error) {
	u, err := o.Cluster.Get(ctx, id)
	switch {
	case err == nil:
		o.say("retire: %s was absent at preflight and now exists (uid %s): left alone, unmanaged", id, u.GetUID())
		return receipts.OutcomeLeftRecreated, nil
	case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		o.say("retire: %s already absent", id)
		return receipts.OutcomeAlreadyAbsent, nil
	}
	return "", fmt.Errorf("retire: %w; nothing further was deleted and the Head stays applying: once it can be read, run `kubectl ql3 resume --preflight FILE`",
		cas.Classify(cas.OpRead, "read "+id.String()+" (absent at preflight)", err))
}

// finalizers names what holds an object (for the timeout message).
func (o *Options) finalizers(ctx context.Context, id inventory.Identity) []string {
	u, err := o.Cluster.Get(ctx, id)
	if err != nil {
		return nil
	}
	return u.GetFinalizers()
}

// checkDeleteAccess refuses, before any write, a caller that may not get
// and delete each retired object by name (the fenced delete and its
// settling and waiting reads). A kind no longer served has nothing left to
// delete and needs nothing.
func (o *Options) checkDeleteAccess(ctx context.Context, ids []inventory.Identity) error {
	if len(ids) == 0 {
		return nil
	}
	review := access.NewReview(o.Cluster)
	var missing []string
	for _, id := range ids {
		gv, _ := schema.ParseGroupVersion(id.APIVersion)
		m, err := o.Cluster.Mapper().RESTMapping(id.GroupKind(), gv.Version)
		switch {
		case meta.IsNoMatchError(err):
			continue
		case err != nil:
			return fail.Errorf(fail.Unavailable, "access check: resolve %s: %w", id, err)
		}
		ns := ""
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ns = id.Namespace
		}
		for _, verb := range []string{"get", "delete"} {
			a := access.Access{Verb: verb, Group: m.Resource.Group, Resource: m.Resource.Resource, Namespace: ns, Name: id.Name}
			ok, err := review.Allowed(ctx, a)
			if err != nil {
				return cas.Classify(cas.OpRead, "access check", err)
			}
			if !ok {
				missing = append(missing, a.String())
			}
		}
	}
	if err := access.MissingError(missing, "`kubectl ql3 rbac DIR --retire-from DIR_OLD` prints the least privilege of a retire"); err != nil {
		return err
	}
	o.say("access: get and delete held on each of the %d retired object(s)", len(ids))
	return nil
}

// RetiredObjects are the objects of the deployed release old that the
// release objs no longer has, compared by group, kind, namespace and name:
// what a retire from old to objs deletes (for `rbac --retire-from`).
func RetiredObjects(old, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	keep := map[inventory.Key]bool{}
	for _, u := range objs {
		keep[identityOf(u).Key()] = true
	}
	var out []*unstructured.Unstructured
	for _, u := range old {
		if !keep[identityOf(u).Key()] {
			out = append(out, u)
		}
	}
	return out
}
