package keyledger

import (
	"crypto/ed25519"
	"encoding/base64"
	"testing"

	"github.com/qinglong/kubectl-ql3/formats/keyset"
)

// key is a deterministic Ed25519 public JWK; seed picks the key.
func key(kid string, seed byte) keyset.JWK {
	s := make([]byte, ed25519.SeedSize)
	s[0] = seed
	pub := ed25519.NewKeyFromSeed(s).Public().(ed25519.PublicKey)
	return keyset.JWK{Kty: keyset.KtyOKP, Kid: kid, Alg: keyset.AlgEdDSA, Crv: keyset.CrvEd25519, X: base64.RawURLEncoding.EncodeToString(pub)}
}

// gen is a valid generation with the given keys (by kid; the seed is the
// kid's first byte) and revoked key IDs.
func gen(t testing.TB, g int64, kids []string, revoked ...string) *keyset.Keyset {
	t.Helper()
	k := &keyset.Keyset{Generation: g, RevokedKids: append([]string{}, revoked...)}
	for _, kid := range kids {
		k.Keys = append(k.Keys, key(kid, kid[0]))
	}
	if err := k.Validate(); err != nil {
		t.Fatal(err)
	}
	return k
}

func ledgerOf(t testing.TB, sets ...*keyset.Keyset) *keyset.Ledger {
	t.Helper()
	l, err := keyset.NewLedger(nil, sets[0])
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
func v1Of(l *keyset.Ledger) *keyset.Ledger {
	return &keyset.Ledger{Schema: keyset.LedgerSchemaV1, Current: l.Current, Generations: l.Generations}
}
