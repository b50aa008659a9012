package jwkset

import (
	"fmt"
	"slices"
)

// Rotation is a planned key rotation: two generations to publish in order
// (docs/keyset.md, "Rotation").
type Rotation struct {
	// Overlap is the current generation plus one, with the new key added to
	// the current keys. Publish it first.
	Overlap *Keyset
	// Revoking is the generation after Overlap: the revoked keys removed
	// and appended to revokedKids. Publish it only after every replica has
	// observed Overlap.
	Revoking *Keyset
	// Revoked are the key IDs Revoking revokes, in current key order.
	Revoked []string
}

// PlanRotation plans replacing keys of current by add. revoke names the
// active keys to retire; empty means every key of current. The result's
// generations satisfy Validate and CheckSuccessor(current, Overlap),
// CheckSuccessor(Overlap, Revoking); errors are fail.Invalid.
func PlanRotation(current *Keyset, add JWK, revoke []string) (*Rotation, error) {
	if err := current.Validate(); err != nil {
		return nil, fmt.Errorf("current: %w", err)
	}
	if err := add.Validate("key"); err != nil {
		return nil, err
	}
	if slices.Contains(current.RevokedKids, add.Kid) {
		return nil, invalidf("key: key ID %q was revoked before and can never be active again; choose a new key ID", add.Kid)
	}
	for _, j := range current.Keys {
		if j.Kid == add.Kid {
			return nil, invalidf("key: key ID %q is already active in generation %d; choose a new key ID", add.Kid, current.Generation)
		}
		if j.Thumbprint() == add.Thumbprint() {
			return nil, invalidf("key: the same public key is already active as %q; generate a new key", j.Kid)
		}
	}
	if len(current.Keys)+1 > MaxKeys {
		return nil, invalidf("keys: generation %d already holds %d keys, the overlap would exceed %d; revoke a key first", current.Generation, len(current.Keys), MaxKeys)
	}
	if current.Generation > MaxGeneration-2 {
		return nil, invalidf("generation: %d leaves no room for two more generations", current.Generation)
	}
	if len(revoke) == 0 {
		revoke = current.Kids()
	}
	var revoked []string
	var kept []JWK
	for _, j := range current.Keys {
		if slices.Contains(revoke, j.Kid) {
			revoked = append(revoked, j.Kid)
		} else {
			kept = append(kept, j)
		}
	}
	for _, kid := range revoke {
		if !slices.Contains(revoked, kid) {
			return nil, invalidf("revoke: %q is not an active key of generation %d (active: %q)", kid, current.Generation, current.Kids())
		}
	}
	if n := len(current.RevokedKids) + len(revoked); n > MaxRevokedKids {
		return nil, invalidf("revokedKids: the revoking generation would list %d revoked key IDs, at most %d are allowed", n, MaxRevokedKids)
	}
	overlap := &Keyset{
		Generation:  current.Generation + 1,
		Keys:        append(slices.Clone(current.Keys), add),
		RevokedKids: slices.Clone(current.RevokedKids),
	}
	revoking := &Keyset{
		Generation:  current.Generation + 2,
		Keys:        append(kept, add),
		RevokedKids: append(slices.Clone(current.RevokedKids), revoked...),
	}
	for _, step := range []struct {
		prev, next *Keyset
	}{{current, overlap}, {overlap, revoking}} {
		if err := step.next.Validate(); err != nil {
			return nil, fmt.Errorf("planned generation %d: %w", step.next.Generation, err)
		}
		if err := CheckSuccessor(step.prev, step.next); err != nil {
			return nil, fmt.Errorf("planned generation %d: %w", step.next.Generation, err)
		}
	}
	return &Rotation{Overlap: overlap, Revoking: revoking, Revoked: revoked}, nil
}
