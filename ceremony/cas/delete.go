package cas

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// rejudges bounds the re-fenced sends of Delete.Unchanged.
const rejudges = 5

// DeleteOutcome is what a fenced delete found and did.
type DeleteOutcome string

const (
	// Deleted: the API server accepted our delete (the object may still be
	// terminating while finalizers run).
	Deleted DeleteOutcome = "deleted"
	// AlreadyAbsent: the object was gone before our delete.
	AlreadyAbsent DeleteOutcome = "already absent"
	// Recreated: the name now holds another object (another UID); it was
	// left alone.
	Recreated DeleteOutcome = "left: recreated"
)

// Delete is one delete of one object fenced by the UID and resourceVersion
// of a read: it can only ever remove exactly that object in exactly the
// state that read showed, and only while the caller still judges that
// state the one it reviewed.
type Delete struct {
	// What names the object in messages.
	What string
	// UID and ResourceVersion are the preconditions of the first send:
	// those of the read the caller validated.
	UID, ResourceVersion string
	// Unchanged, when set, judges an object of the same UID read later
	// with another resourceVersion: true when what the caller reviewed is
	// unchanged (only status or bookkeeping moved), and the delete is sent
	// again fenced by that read's resourceVersion (at most 5 times); false
	// is a conflict. Nil: any other resourceVersion is a conflict.
	Unchanged func(cur metav1.Object) bool
	// Send deletes with the given options (client-go's Delete).
	Send func(ctx context.Context, opts metav1.DeleteOptions) error
	// Get is the exact read of the object (a 404 is an error Get returns).
	Get func(ctx context.Context) (metav1.Object, error)
	// Say reports progress; nil is quiet.
	Say Progress
	// DryRun sends dryRun=All (preflight): nothing is deleted.
	DryRun bool
	// SettleTimeout bounds the reads that settle an unknown outcome
	// (default 30s), as Write's.
	SettleTimeout time.Duration
}

// Do deletes and settles. A precondition that no longer holds because
// someone changed the object (same UID, another resourceVersion, not
// being deleted) is a conflict naming both versions; nothing is deleted.
func (d *Delete) Do(ctx context.Context) (DeleteOutcome, error) {
	uid, rv := types.UID(d.UID), d.ResourceVersion
	// The precondition points at rv: re-fencing (Unchanged) moves it.
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}}
	if d.DryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	uncertain := false // an earlier send's outcome is unknown: it may have deleted
	moves := 0         // re-fenced on a newer resourceVersion judged Unchanged
	for attempt := 1; ; attempt++ {
		start := time.Now()
		err := d.Send(ctx, opts)
		if err == nil {
			return Deleted, nil
		}
		unknown := Unknown(err)
		if !unknown && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			if uncertain {
				return "", fail.Errorf(fail.Unavailable, "delete %s: a resend was refused (%v) after an earlier delete whose outcome is unknown: rerun to settle it", d.What, Classify(OpDelete, "resend", err))
			}
			return "", Classify(OpDelete, "delete "+d.What, err)
		}
		if unknown {
			uncertain = true
			d.Say.Printf("%s: the answer to the delete did not arrive (after %s: %v); re-reading to decide", d.What, time.Since(start).Round(time.Millisecond), err)
		}
		cur, present, rerr := settle(ctx, d.SettleTimeout, "delete "+d.What, func(ctx context.Context) (metav1.Object, bool, error) {
			obj, err := d.Get(ctx)
			switch {
			case err == nil:
				return obj, true, nil
			case apierrors.IsNotFound(err):
				return nil, false, nil
			}
			return nil, false, Classify(OpRead, "read "+d.What, err)
		})
		if rerr != nil {
			return "", rerr
		}
		switch {
		case !present && uncertain && !d.DryRun:
			// Gone after a delete whose answer we lost (perhaps seen by a
			// resend's 404): ours, or one that raced it to the same end.
			return Deleted, nil
		case !present:
			return AlreadyAbsent, nil
		case string(cur.GetUID()) != d.UID:
			d.Say.Printf("%s: the name now holds another object (uid %s, not %s): left alone", d.What, cur.GetUID(), d.UID)
			return Recreated, nil
		case cur.GetDeletionTimestamp() != nil && !d.DryRun:
			return Deleted, nil // terminating: our delete (or an equal one) was accepted
		case cur.GetResourceVersion() != rv && d.Unchanged != nil && d.Unchanged(cur):
			if moves++; moves > rejudges {
				return "", fail.Errorf(fail.Unavailable, "delete %s: its status kept changing (resourceVersion %s now, what was reviewed unchanged) through %d fenced deletes: not deleted; rerun", d.What, cur.GetResourceVersion(), rejudges+1)
			}
			d.Say.Printf("%s: resourceVersion %s now, not %s, but what was reviewed is unchanged (status or bookkeeping only): deleting fenced on the new one", d.What, cur.GetResourceVersion(), rv)
			rv = cur.GetResourceVersion()
			continue
		case cur.GetResourceVersion() != rv && d.Unchanged != nil:
			return "", fail.Errorf(fail.Conflict, "delete %s: changed since it was recorded (resourceVersion %s recorded, %s now; what was reviewed changed): not deleted", d.What, d.ResourceVersion, cur.GetResourceVersion())
		case cur.GetResourceVersion() != rv:
			return "", fail.Errorf(fail.Conflict, "delete %s: changed since it was recorded (resourceVersion %s recorded, %s now): not deleted", d.What, rv, cur.GetResourceVersion())
		case !unknown || attempt > resends || ctx.Err() != nil:
			return "", fail.Errorf(fail.Unavailable, "delete %s: not seen to take effect (%v): its outcome is unknown; rerunning settles it", d.What, err)
		}
	}
}

// WaitGone polls get until the object is gone, or the name holds another
// object, bounded by ctx (finalizers are respected, never removed).
func WaitGone(ctx context.Context, uid string, get func(ctx context.Context) (metav1.Object, error), every time.Duration) error {
	return wait.PollUntilContextCancel(ctx, every, true, func(ctx context.Context) (bool, error) {
		obj, err := get(ctx)
		switch {
		case apierrors.IsNotFound(err):
			return true, nil
		case err == nil:
			return string(obj.GetUID()) != uid, nil
		case Unknown(err):
			return false, nil
		}
		return false, Classify(OpRead, "wait for deletion", err)
	})
}
