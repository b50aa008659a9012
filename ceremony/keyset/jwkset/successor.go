package jwkset

import (
	"fmt"
	"slices"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// CheckSuccessor reports whether next may be published after prev, both
// valid generations (docs/keyset.md, "Successor rules"):
//
//  1. the generation never decreases;
//  2. the same generation never changes digest;
//  3. revocations only append: prev.RevokedKids is a prefix of
//     next.RevokedKids;
//  4. an active key of prev leaves only by being revoked in next, and a key
//     ID that stays active keeps exactly the same key;
//  5. a key of prev that next revokes is not active in next under another
//     key ID (same RFC 7638 thumbprint).
//
// Two generations show the key material only of prev's keys; a key
// revoked earlier is judged by the ledger (Ledger.Admit), which records
// the thumbprint of every key it saw revoked.
//
// A violation is fail.Conflict: next contradicts the history prev stands
// for, whichever of the two is at fault.
func CheckSuccessor(prev, next *Keyset) error {
	if next.Generation < prev.Generation {
		return conflictf("generation %d is older than the previous generation %d: a keyset never goes back; publish a generation above %d", next.Generation, prev.Generation, prev.Generation)
	}
	pd, err := prev.Digest()
	if err != nil {
		return err
	}
	nd, err := next.Digest()
	if err != nil {
		return err
	}
	if next.Generation == prev.Generation {
		if pd != nd {
			return conflictf("generation %d already exists with digest %s, this one has %s: a published generation never changes; publish the change as generation %d", next.Generation, pd, nd, prev.Generation+1)
		}
		return nil
	}
	if len(next.RevokedKids) < len(prev.RevokedKids) || !slices.Equal(prev.RevokedKids, next.RevokedKids[:len(prev.RevokedKids)]) {
		return conflictf("revokedKids of generation %d must start with generation %d's list %q: revocations only append", next.Generation, prev.Generation, prev.RevokedKids)
	}
	nextKeys := map[string]JWK{}
	for _, j := range next.Keys {
		nextKeys[j.Kid] = j
	}
	newlyRevoked := next.RevokedKids[len(prev.RevokedKids):]
	revokedNow := map[string]string{} // thumbprint → the kid next revokes it as
	for _, j := range prev.Keys {
		n, active := nextKeys[j.Kid]
		switch {
		case active && n != j:
			return conflictf("key %q changed between generations %d and %d: a key ID keeps its key; add the new key under a new key ID", j.Kid, prev.Generation, next.Generation)
		case !active && !slices.Contains(newlyRevoked, j.Kid):
			return conflictf("active key %q of generation %d is missing from generation %d without being revoked: append %q to revokedKids", j.Kid, prev.Generation, next.Generation, j.Kid)
		case !active:
			revokedNow[j.Thumbprint()] = j.Kid
		}
	}
	for _, j := range next.Keys {
		if kid, ok := revokedNow[j.Thumbprint()]; ok {
			return revivedf(j.Kid, next.Generation, kid, fmt.Sprintf("in generation %d", next.Generation), j.Thumbprint())
		}
	}
	return nil
}

// revivedf refuses key kid of generation gen: its thumbprint tp was
// revoked as revokedKid (when says in which generation). No flag
// overrides it.
func revivedf(kid string, gen int64, revokedKid, when, tp string) error {
	return conflictf("key %q of generation %d is the key revoked as %q %s (RFC 7638 thumbprint %s): a revoked key stays revoked under every key ID; generate a new key", kid, gen, revokedKid, when, tp)
}

func conflictf(format string, args ...any) error {
	return fail.Errorf(fail.Conflict, "keyset: "+format, args...)
}
