package receipts

import (
	"fmt"
	"regexp"
	"time"

	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// SupersededAtLayout is the form of Superseded.At: RFC 3339 in UTC, whole
// seconds.
const SupersededAtLayout = "2006-01-02T15:04:05Z"

var mutationIDRE = regexp.MustCompile(`^[0-9a-f]{32}$`)

// CheckSupersedes checks a transition's supersedes list against the
// generation that carries it (docs/receipts.md §2.1, "transition.supersedes"):
// absent, or on an upgrade or rollback only, the generations just below
// this one, oldest first, each an upgrade or rollback of generation 2 or
// more with its digests, mutation id and time well formed. Every failure is
// fail.Tamper; the Head's reader (ceremony/deploy) applies the same rules.
func CheckSupersedes(generation int64, t Transition) error {
	ss := t.Supersedes
	if ss == nil {
		return nil
	}
	if t.Kind != KindUpgrade && t.Kind != KindRollback {
		return fieldErr("transition.supersedes", "is set on a %s; only an upgrade or a rollback supersedes", t.Kind)
	}
	if len(ss) == 0 {
		return fieldErr("transition.supersedes", "is empty; it is absent when nothing was superseded")
	}
	first := generation - int64(len(ss))
	if first < 2 {
		return fieldErr("transition.supersedes", "lists %d generation(s) below generation %d, reaching below generation 2 (an install is never superseded)", len(ss), generation)
	}
	for i, s := range ss {
		f := fmt.Sprintf("transition.supersedes[%d]", i)
		if want := first + int64(i); s.Generation != want {
			return fieldErr(f+".generation", "%d, want %d: the superseded generations are the ones just below %d, oldest first", s.Generation, want, generation)
		}
		if s.Kind != KindUpgrade && s.Kind != KindRollback {
			return fieldErr(f+".kind", "%q; only an upgrade or a rollback is superseded", s.Kind)
		}
		for _, m := range []struct {
			ok              bool
			member, v, want string
		}{
			{isSemVer(s.Version), "version", s.Version, "a SemVer 2.0.0 version"},
			{canon.IsDigest(s.CommandDigest), "commandDigest", s.CommandDigest, "a digest"},
			{canon.IsDigest(s.PreflightDigest), "preflightDigest", s.PreflightDigest, "a digest"},
			{mutationIDRE.MatchString(s.MutationID), "mutationId", s.MutationID, "32 lowercase hex digits"},
		} {
			if !m.ok {
				return fieldErr(f+"."+m.member, "%q is not %s", m.v, m.want)
			}
		}
		if at, err := time.Parse(SupersededAtLayout, s.At); err != nil || at.Format(SupersededAtLayout) != s.At {
			return fieldErr(f+".at", "%q is not a UTC time of the form %s", s.At, SupersededAtLayout)
		}
	}
	return nil
}

// SupersededGenerations are the generations t supersedes.
func SupersededGenerations(t Transition) []int64 {
	out := make([]int64, len(t.Supersedes))
	for i, s := range t.Supersedes {
		out[i] = s.Generation
	}
	return out
}
