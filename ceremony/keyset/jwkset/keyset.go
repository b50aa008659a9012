// Package jwkset is the identity keyset file format (docs/keyset.md): a JWK
// Set of at most eight reviewed public signing keys, a generation number
// and the append-only list of revoked key IDs. It parses and validates one
// generation (Parse), checks that one generation may follow another
// (CheckSuccessor), digests a generation under its own domain (Digest) and
// plans a key rotation (PlanRotation).
//
// Everything here is pure except ReadFile, which reads a file with the
// identity and permission checks the format requires; the package imports
// no cluster code, so a verifier and a future ledger publisher share it.
package jwkset

import (
	"fmt"
	"regexp"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// Limits of the format (docs/keyset.md).
const (
	// DefaultMaxBytes is the default size cap of a keyset file.
	DefaultMaxBytes = 64 << 10
	// HardMaxBytes is the largest size cap a caller may choose; Parse
	// refuses anything longer.
	HardMaxBytes = 256 << 10
	// MaxKeys is the most public keys one generation may hold.
	MaxKeys = 8
	// MaxRevokedKids is the most revoked key IDs one generation may list.
	MaxRevokedKids = 64
	// MaxGeneration is the largest generation: 2^53-1, so that every
	// generation has an exact canonical (RFC 8785) form.
	MaxGeneration = 1<<53 - 1
	// MaxKidLen is the longest key ID, in bytes.
	MaxKidLen = 128
)

// Keyset is one generation of the identity keyset. Every key in Keys is
// active; RevokedKids is the append-only history of revoked key IDs.
type Keyset struct {
	Generation  int64    `json:"generation"`
	Keys        []JWK    `json:"keys"`
	RevokedKids []string `json:"revokedKids"`
}

// JWK is one public signing key (RFC 7517) of the three accepted kinds:
// OKP/Ed25519/EdDSA (Crv, X), EC/P-256/ES256 (Crv, X, Y) and RSA/RS256
// (N, E). Use is empty or "sig". Binary members are base64url without
// padding, exactly as in the file.
type JWK struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use,omitempty"`
	Crv string `json:"crv,omitempty"`
	X   string `json:"x,omitempty"`
	Y   string `json:"y,omitempty"`
	N   string `json:"n,omitempty"`
	E   string `json:"e,omitempty"`
}

var kidRE = regexp.MustCompile(`^[A-Za-z0-9._~:+/=-]+$`)

// checkKid validates a key ID's syntax; field names it in errors.
func checkKid(field, kid string) error {
	if kid == "" || len(kid) > MaxKidLen || !kidRE.MatchString(kid) {
		return invalidf("%s: key ID %q must be 1 to %d characters of A-Z a-z 0-9 . _ ~ : + / = -", field, kid, MaxKidLen)
	}
	return nil
}

// Kids lists the active key IDs in file order.
func (k *Keyset) Kids() []string {
	out := make([]string, len(k.Keys))
	for i, j := range k.Keys {
		out[i] = j.Kid
	}
	return out
}

// Validate checks every rule of one generation that does not depend on
// another generation: the generation range, 1 to MaxKeys valid public keys
// with distinct key IDs and distinct key material, at most MaxRevokedKids
// distinct revoked key IDs, and no active key among the revoked ones.
// Parse calls it; callers that build a Keyset in memory call it too.
func (k *Keyset) Validate() error {
	if k.Generation < 1 || k.Generation > MaxGeneration {
		return invalidf("generation: %d is out of range 1 to %d", k.Generation, int64(MaxGeneration))
	}
	if len(k.Keys) == 0 {
		return invalidf("keys: no active key; a keyset needs at least one")
	}
	if len(k.Keys) > MaxKeys {
		return invalidf("keys: %d keys, at most %d are allowed; revoke old keys first", len(k.Keys), MaxKeys)
	}
	kids := map[string]int{}
	material := map[string]int{}
	for i, j := range k.Keys {
		field := fmt.Sprintf("keys[%d]", i)
		if err := j.Validate(field); err != nil {
			return err
		}
		if p, dup := kids[j.Kid]; dup {
			return invalidf("%s: duplicate key ID %q (also keys[%d])", field, j.Kid, p)
		}
		kids[j.Kid] = i
		m := j.Thumbprint()
		if p, dup := material[m]; dup {
			return invalidf("%s: the same public key as keys[%d] under another key ID", field, p)
		}
		material[m] = i
	}
	if len(k.RevokedKids) > MaxRevokedKids {
		return invalidf("revokedKids: %d entries, at most %d are allowed", len(k.RevokedKids), MaxRevokedKids)
	}
	revoked := map[string]int{}
	for i, kid := range k.RevokedKids {
		field := fmt.Sprintf("revokedKids[%d]", i)
		if err := checkKid(field, kid); err != nil {
			return err
		}
		if p, dup := revoked[kid]; dup {
			return invalidf("%s: %q is already revoked at revokedKids[%d]", field, kid, p)
		}
		revoked[kid] = i
		if a, active := kids[kid]; active {
			return invalidf("%s: %q is also an active key (keys[%d]); a revoked key ID cannot be active", field, kid, a)
		}
	}
	return nil
}

func invalidf(format string, args ...any) error {
	return fail.Errorf(fail.Invalid, "keyset: "+format, args...)
}
