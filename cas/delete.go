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
// of the read the caller validated: it can only ever remove exactly that
// object in exactly that state.
type Delete struct {
	// What names the object in messages.
	What string
	// UID and ResourceVersion are the preconditions.
	UID, ResourceVersion string
	// Send deletes with the given options (client-go's Delete).
	Send func(ctx context.Context, opts metav1.DeleteOptions) error
	// Get is the exact read of the object (a 404 is an error Get returns).
	Get func(ctx context.Context) (metav1.Object, error)
	// Say reports progress; nil is quiet.
	Say func(format string, args ...any)
	// DryRun sends dryRun=All (preflight): nothing is deleted.
	DryRun bool
}

func (d *Delete) say(format string, args ...any) {
	if d.Say != nil {
		d.Say(format, args...)
	}
}

// Do deletes and settles. A precondition that no longer holds because
// someone changed the object (same UID, another resourceVersion, not
// being deleted) is a conflict naming both versions; nothing is deleted.
func (d *Delete) Do(ctx context.Context) (DeleteOutcome, error) {
	uid, rv := types.UID(d.UID), d.ResourceVersion
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}}
	if d.DryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	for attempt := 1; ; attempt++ {
		start := time.Now()
		err := d.Send(ctx, opts)
		if err == nil {
			return Deleted, nil
		}
		unknown := Unknown(err)
		if !unknown && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return "", Classify(OpDelete, "delete "+d.What, err)
		}
		if unknown {
			d.say("%s: the answer to the delete did not arrive (after %s: %v); re-reading to decide", d.What, time.Since(start).Round(time.Millisecond), err)
		}
		cur, present, rerr := d.settle(ctx)
		if rerr != nil {
			return "", rerr
		}
		switch {
		case !present && unknown && !d.DryRun:
			// Gone after a delete whose answer we lost: ours (or one that
			// raced it to the same end).
			return Deleted, nil
		case !present:
			return AlreadyAbsent, nil
		case string(cur.GetUID()) != d.UID:
			d.say("%s: the name now holds another object (uid %s, not %s): left alone", d.What, cur.GetUID(), d.UID)
			return Recreated, nil
		case cur.GetDeletionTimestamp() != nil && !d.DryRun:
			return Deleted, nil // terminating: our delete (or an equal one) was accepted
		case cur.GetResourceVersion() != rv:
			return "", fail.Errorf(fail.Conflict, "delete %s: changed since it was recorded (resourceVersion %s recorded, %s now): not deleted", d.What, rv, cur.GetResourceVersion())
		case !unknown || attempt > resends:
			return "", fail.Errorf(fail.Unavailable, "delete %s: %v (the object is unchanged; rerunning is safe)", d.What, err)
		}
	}
}

func (d *Delete) settle(ctx context.Context) (metav1.Object, bool, error) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var (
		cur     metav1.Object
		present bool
		last    error
	)
	backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 1.5, Jitter: 0.1, Steps: 12, Cap: 3 * time.Second}
	err := wait.ExponentialBackoffWithContext(sctx, backoff, func(ctx context.Context) (bool, error) {
		obj, err := d.Get(ctx)
		switch {
		case err == nil:
			cur, present = obj, true
			return true, nil
		case apierrors.IsNotFound(err):
			return true, nil
		case Unknown(err):
			last = err
			return false, nil
		}
		last = Classify(OpRead, "read "+d.What, err)
		return false, last
	})
	if err != nil {
		if last != nil && !fail.Is(last, fail.Unavailable) {
			return nil, false, last
		}
		return nil, false, fail.Errorf(fail.Unavailable, "delete %s: cannot re-read to settle it (its outcome is unknown; rerun to settle it): %v", d.What, err)
	}
	return cur, present, nil
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
