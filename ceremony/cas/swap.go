package cas

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// Swap is the compare-and-swap of one named object as every sibling
// ceremony makes it (the package pointer, the environment bundle, the
// keyset and its ledger, the worker's stage and credential Secrets): read
// the object exactly; Check what is there; an exact Replay writes nothing;
// Build what to write from that read; Review the write; write it through
// Write — an update carrying the resourceVersion of that read and only
// that one, or a create when the read found nothing — every unknown
// outcome settled by reading the object again, each read Checked once
// more. The caller reviews the read (with whatever else it needs) before
// Do, and decides what the outcome means.
//
// Do runs the whole skeleton; a caller that reads or judges several
// objects before the first write (the keyset and its ledger, the worker's
// Deployment and credential Secret) calls Read and Write itself.
type Swap[T Object] struct {
	Client Client[T]
	// Name is the object's name; What names it in messages.
	Name, What string
	// Check validates an object that is present, on the read and on every
	// read that settles the write; its error is returned as it is (e.g.
	// tamper, exit 5). Optional.
	Check func(cur T) error
	// Replay reports whether cur (present, checked) already holds exactly
	// the intent: Do then writes nothing. Optional: nil never replays.
	Replay func(cur T) bool
	// Build is what Do writes over the read (cur, present). Its error (a
	// conflict with the state read, say) ends Do with nothing written.
	Build func(ctx context.Context, cur T, present bool) (T, error)
	// Review is the permission review of the write (create is whether it
	// creates), asked after Build and before the write: it fails closed.
	// Optional: nil when the caller reviewed the write before the read.
	Review func(ctx context.Context, create bool) error
	// Unsettled maps an error of the write itself that leaves its outcome
	// unknown (class unavailable), e.g. to say how to settle it. Optional.
	Unsettled func(err error) error
	// FieldManager, Policy, Landed, Describe, Refused, Say and
	// SettleTimeout are the write's (see Write).
	FieldManager  string
	Policy        Policy
	Landed        func(cur T) bool
	Describe      func(cur T, present bool) string
	Refused       func(op Op, err error) error
	Say           Progress
	SettleTimeout time.Duration
}

// Swapped is a completed Swap.
type Swapped[T Object] struct {
	// Object is the object now: as read when Replayed, else as written or,
	// when Settled, as read back.
	Object T
	// Created: the read found nothing and the object was created.
	Created bool
	// Replayed: the object already held exactly the intent; nothing was
	// written.
	Replayed bool
	// Settled: the write's answer was lost (or a 409) and reading the
	// object back showed it held exactly the intent.
	Settled bool
}

// Do reads, checks, replays or builds, reviews and writes (see Swap).
func (s *Swap[T]) Do(ctx context.Context) (Swapped[T], error) {
	cur, present, err := s.Read(ctx)
	if err != nil {
		return Swapped[T]{}, err
	}
	if present && s.Replay != nil && s.Replay(cur) {
		return Swapped[T]{Object: cur, Replayed: true}, nil
	}
	desired, err := s.Build(ctx, cur, present)
	if err != nil {
		return Swapped[T]{}, err
	}
	got, err := s.Write(ctx, cur, present, desired)
	if err != nil {
		return Swapped[T]{}, err
	}
	return Swapped[T]{Object: got.Object, Created: !present, Settled: got.Settled}, nil
}

// Read is the exact read of the object; a present one is Checked.
func (s *Swap[T]) Read(ctx context.Context) (T, bool, error) {
	cur, present, err := Read(ctx, s.Client, s.Name, s.What)
	if err != nil || !present || s.Check == nil {
		return cur, present, err
	}
	return cur, present, s.Check(cur)
}

// Write reviews the write (Review) and writes desired over the read (cur,
// present): created when the read found nothing, else updated carrying
// cur's resourceVersion.
func (s *Swap[T]) Write(ctx context.Context, cur T, present bool, desired T) (Result[T], error) {
	if present {
		desired.SetResourceVersion(cur.GetResourceVersion()) // the checked read's, and only that one
	}
	if s.Review != nil {
		if err := s.Review(ctx, !present); err != nil {
			return Result[T]{}, err
		}
	}
	w := Write[T]{
		Client: s.Client, What: s.What, Desired: desired, Create: !present, FieldManager: s.FieldManager,
		Landed: s.Landed, Describe: s.Describe, Refused: s.Refused, Policy: s.Policy, Say: s.Say, SettleTimeout: s.SettleTimeout,
	}
	if s.Check != nil {
		w.Validate = func(cur T, present bool) error {
			if !present {
				return nil
			}
			return s.Check(cur)
		}
	}
	got, err := w.Do(ctx)
	if err != nil && s.Unsettled != nil && fail.Is(err, fail.Unavailable) {
		return got, s.Unsettled(err)
	}
	return got, err
}

// MissingNamespace is a Write's Refused for an object of namespace ns: a
// create answered 404 means the namespace does not exist (invalid: create
// it first); any other refusal falls back to Classify.
func MissingNamespace(ns string) func(op Op, err error) error {
	return func(op Op, err error) error {
		if op == OpCreate && apierrors.IsNotFound(err) {
			return fail.Errorf(fail.Invalid, "namespace %q does not exist: create it first (%v)", ns, err)
		}
		return nil
	}
}
