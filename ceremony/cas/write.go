package cas

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// Object is a typed API object (a ConfigMap, a Secret, a Deployment).
type Object interface {
	metav1.Object
	runtime.Object
}

// Client is the exact-object API of one kind in one namespace. client-go's
// typed clients satisfy it as they are: ConfigMaps(ns), Secrets(ns),
// Deployments(ns). No patch, no list, no watch: a CAS never needs them.
type Client[T Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// Read is the exact read of one object: (obj, true) when it exists,
// (zero, false) when the API server answered 404, or a classified error.
func Read[T Object](ctx context.Context, c Client[T], name, what string) (T, bool, error) {
	var zero T
	obj, err := c.Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return obj, true, nil
	case apierrors.IsNotFound(err):
		return zero, false, nil
	}
	return zero, false, Classify(OpRead, "read "+what, err)
}

// Policy says what a writer does when a write's outcome is unknown (no
// answer, 408, 429, 5xx) and the object, read again, shows neither the
// intent nor any other change.
type Policy int

const (
	// Resend sends the same compare-and-swap again, a bounded number of
	// times, while nothing moved: a resend cannot overwrite anyone, since
	// its resourceVersion (or its create) fails if anything changed. Then
	// unavailable. The deployment Head uses it.
	Resend Policy = iota
	// SettleOnce reads once: landed is success, moved is a conflict,
	// unchanged is unavailable (nothing was written; rerunning is safe).
	SettleOnce
	// NoGuess never decides an unknown outcome: it is unavailable at once,
	// and the caller tells the operator how to settle it (the package
	// pointer: `kubectl ql3 package inspect`). A 409 is still settled by
	// reading (exact replay or conflict).
	NoGuess
)

// resends bounds Policy Resend.
const resends = 3

// Write is one compare-and-swap of one named object.
type Write[T Object] struct {
	Client Client[T]
	// What names the object in messages, e.g. "head ns/qinglong3-deployment-head".
	What string
	// Desired is the object to write. For an update its ResourceVersion is
	// the one of the read that was validated, and only that one.
	Desired T
	// Create is true when that read found the object absent.
	Create       bool
	FieldManager string
	// Validate checks every object read to settle a write (e.g. a tampered
	// Head is tamper, exit 5): its error is returned as it is. Optional.
	Validate func(cur T, present bool) error
	// Landed reports whether cur (read back, validated) is exactly the intent.
	Landed func(cur T) bool
	// Describe says who holds cur (nil-safe for absent: present false), for
	// a conflict message. Optional.
	Describe func(cur T, present bool) string
	// Refused maps a definite refusal (a 4xx other than 409) to the
	// caller's error; nil, or a nil result, falls back to Classify.
	Refused func(op Op, err error) error
	Policy  Policy
	// Say reports progress (one line each); nil is quiet.
	Say Progress
	// SettleTimeout bounds the reads that settle an unknown outcome
	// (default 30s). They run even when ctx has expired, since a write cut
	// off by the command's own deadline still needs its outcome decided.
	SettleTimeout time.Duration
}

// Result is a settled write.
type Result[T Object] struct {
	Object T
	// Settled is true when the outcome was decided by reading (a lost
	// answer or a 409) and the object held exactly the intent.
	Settled bool
}

// Do writes and settles: success is only ever "the object now holds exactly
// the intent", read from the API server or answered by it.
func (w *Write[T]) Do(ctx context.Context) (Result[T], error) {
	op := OpUpdate
	if w.Create {
		op = OpCreate
	}
	base := w.Desired.GetResourceVersion()
	if !w.Create && base == "" {
		return Result[T]{}, fail.Errorf(fail.Other, "%s: update without resourceVersion refused", w.What)
	}
	uncertain := false // an earlier send's outcome is unknown: it may still land
	for attempt := 1; ; attempt++ {
		start := time.Now()
		got, err := w.send(ctx, op)
		if err == nil {
			return Result[T]{Object: got}, nil
		}
		took := time.Since(start).Round(time.Millisecond)
		conflict := apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
		unknown := Unknown(err)
		if !conflict && !unknown && !uncertain {
			// A definite answer to our only send: nothing was written.
			if w.Refused != nil {
				if rerr := w.Refused(op, err); rerr != nil {
					return Result[T]{}, rerr
				}
			}
			return Result[T]{}, Classify(op, w.What+" write", err)
		}
		if !conflict && !unknown {
			// A definite refusal of a resend: the first send's outcome is
			// still unknown, so this is not "nothing was written".
			return Result[T]{}, fail.Errorf(fail.Unavailable, "%s: a resend was refused (%v) after an earlier write whose outcome is unknown: rerun to settle it", w.What, Classify(op, "resend", err))
		}
		if unknown {
			uncertain = true
			if w.Policy == NoGuess {
				return Result[T]{}, fail.Errorf(fail.Unavailable, "%s: the answer to the write did not arrive (after %s: %v): the write may or may not have landed; nothing was guessed", w.What, took, err)
			}
			w.Say.Printf("%s: the answer to the write did not arrive (after %s: %v); re-reading to decide", w.What, took, err)
		} else {
			w.Say.Printf("%s: the write was refused as a conflict (%v); re-reading to decide", w.What, err)
		}
		cur, present, rerr := settle(ctx, w.SettleTimeout, w.What, func(ctx context.Context) (T, bool, error) {
			return Read(ctx, w.Client, w.Desired.GetName(), w.What)
		})
		if rerr != nil {
			return Result[T]{}, rerr
		}
		if w.Validate != nil {
			if err := w.Validate(cur, present); err != nil {
				return Result[T]{}, err
			}
		}
		if present && w.Landed(cur) {
			w.Say.Printf("%s: the write had landed (exact replay of our intent)", w.What)
			return Result[T]{Object: cur, Settled: true}, nil
		}
		unchanged := (w.Create && !present) || (!w.Create && present && cur.GetResourceVersion() == base)
		switch {
		case conflict && !uncertain:
			return Result[T]{}, w.moved(cur, present, "nothing of ours was written")
		case !unchanged:
			return Result[T]{}, w.moved(cur, present, "our write may have landed and been superseded, or not landed at all")
		case w.Policy == SettleOnce || attempt > resends || ctx.Err() != nil:
			// Not seen to land — but an unanswered write can still commit
			// after this read (the API server's handler goes on after a
			// 504 or a client timeout): never "nothing was written".
			return Result[T]{}, fail.Errorf(fail.Unavailable, "%s: the write was not seen to land (%v): its outcome is unknown; rerunning settles it", w.What, err)
		}
		w.Say.Printf("%s: the write was not seen to land and nothing moved: sending the same compare-and-swap again", w.What)
	}
}

func (w *Write[T]) send(ctx context.Context, op Op) (T, error) {
	obj := w.Desired.DeepCopyObject().(T)
	if op == OpCreate {
		obj.SetResourceVersion("")
		return w.Client.Create(ctx, obj, metav1.CreateOptions{FieldManager: w.FieldManager})
	}
	return w.Client.Update(ctx, obj, metav1.UpdateOptions{FieldManager: w.FieldManager})
}

func (w *Write[T]) moved(cur T, present bool, ours string) error {
	desc := "removed"
	if present {
		desc = "changed (resourceVersion " + cur.GetResourceVersion() + ")"
	}
	if w.Describe != nil {
		desc = w.Describe(cur, present)
	}
	return fail.Errorf(fail.Conflict, "%s: another writer won: %s; %s", w.What, desc, ours)
}

// settle reads an object until an answer arrives, with backoff, bounded by
// timeout (default 30s) and independent of ctx's deadline: a write cut off
// by the command's own deadline still needs its outcome decided. A
// definite refusal of the read (401, 403, …) ends it at once: waiting does
// not help, and the outcome is unavailable (unknown) all the same.
func settle[T any](ctx context.Context, timeout time.Duration, what string, read func(context.Context) (T, bool, error)) (T, bool, error) {
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	var (
		cur     T
		present bool
		last    error
	)
	backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 1.5, Jitter: 0.1, Steps: 12, Cap: 3 * time.Second}
	err := wait.ExponentialBackoffWithContext(sctx, backoff, func(ctx context.Context) (bool, error) {
		var err error
		cur, present, err = read(ctx)
		if err == nil {
			return true, nil
		}
		last = err
		if !fail.Is(err, fail.Unavailable) {
			return false, err // forbidden or another definite refusal: waiting does not help
		}
		return false, nil
	})
	if err != nil {
		var zero T
		if last != nil && !fail.Is(last, fail.Unavailable) {
			// The read was refused (401 after a credential expired, 403
			// from RBAC or a webhook, 400…): that says nothing about the
			// write, whose outcome stays unknown — never invalid input.
			return zero, false, fail.Errorf(fail.Unavailable, "%s: the read that settles the write was refused (%v): its outcome is unknown; restore read access and rerun to settle it", what, last)
		}
		if last == nil {
			last = err
		}
		return zero, false, fail.Errorf(fail.Unavailable, "%s: cannot re-read to settle the write (its outcome is unknown; rerun to settle it): %v", what, last)
	}
	return cur, present, nil
}

// Progress is where a ceremony says what it is doing (stderr in the CLI);
// a nil Progress says nothing.
type Progress func(format string, args ...any)

// Printf says it, if anyone listens.
func (p Progress) Printf(format string, args ...any) {
	if p != nil {
		p(format, args...)
	}
}
