package keyset

import (
	"crypto/ed25519"
	"encoding/base64"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/keyset/jwkset"
)

// key is a deterministic Ed25519 public JWK; seed picks the key.
func key(kid string, seed byte) jwkset.JWK {
	s := make([]byte, ed25519.SeedSize)
	s[0] = seed
	pub := ed25519.NewKeyFromSeed(s).Public().(ed25519.PublicKey)
	return jwkset.JWK{Kty: jwkset.KtyOKP, Kid: kid, Alg: jwkset.AlgEdDSA, Crv: jwkset.CrvEd25519, X: base64.RawURLEncoding.EncodeToString(pub)}
}

// gen is a valid generation with the given keys (by kid; the seed is the
// kid's first byte) and revoked key IDs.
func gen(t testing.TB, g int64, kids []string, revoked ...string) *jwkset.Keyset {
	t.Helper()
	k := &jwkset.Keyset{Generation: g, RevokedKids: append([]string{}, revoked...)}
	for _, kid := range kids {
		k.Keys = append(k.Keys, key(kid, kid[0]))
	}
	if err := k.Validate(); err != nil {
		t.Fatal(err)
	}
	return k
}

func ledgerOf(t testing.TB, sets ...*jwkset.Keyset) *jwkset.Ledger {
	t.Helper()
	l, err := jwkset.NewLedger(nil, sets[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range sets[1:] {
		if l, _, err = l.Admit(k); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// v1Of is l as a ledger written before thumbprints were recorded.
func v1Of(l *jwkset.Ledger) *jwkset.Ledger {
	return &jwkset.Ledger{Schema: jwkset.LedgerSchemaV1, Current: l.Current, Generations: l.Generations}
}
