package jwkset

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// The digest is the documented formula over the file's canonical JSON,
// computed here from the primitive, not from a stored value.
func TestDigestFormula(t *testing.T) {
	// Members out of order, white space, an escaped character: the file's
	// text differs from its canonical form.
	x := edKey("a", 1).X
	text := "{ \"revokedKids\": [\"o\\u006cd\"],\n \"keys\": [{\"x\": \"" + x + "\", \"kty\": \"OKP\", \"alg\": \"EdDSA\", \"crv\": \"Ed25519\", \"kid\": \"a\"}],\n \"generation\": 12 }\n"
	k, err := Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	canonical := `{"generation":12,"keys":[{"alg":"EdDSA","crv":"Ed25519","kid":"a","kty":"OKP","x":"` + x + `"}],"revokedKids":["old"]}`
	got, err := k.Canonical()
	if err != nil || string(got) != canonical {
		t.Fatalf("Canonical = %s, %v\nwant %s", got, err, canonical)
	}
	sum := sha256.Sum256([]byte("kubectl-ql3/keyset/v1\x00" + canonical))
	want := "sha256:" + hex.EncodeToString(sum[:])
	d, err := k.Digest()
	if err != nil || d != want {
		t.Fatalf("Digest = %s, %v; want %s", d, err, want)
	}
	fromFile, err := canon.CanonicalizeJSON([]byte(text))
	if err != nil || canon.DigestBytes(DomainKeyset, fromFile) != want {
		t.Fatalf("the file's own canonical JSON digests differently: %s", fromFile)
	}
	// Every part is bound.
	for name, change := range map[string]func(k *Keyset){
		"generation": func(k *Keyset) { k.Generation++ },
		"kid":        func(k *Keyset) { k.Keys[0].Kid = "b" },
		"use":        func(k *Keyset) { k.Keys[0].Use = "sig" },
		"revoked":    func(k *Keyset) { k.RevokedKids = append(k.RevokedKids, "z") },
	} {
		c := *k
		c.Keys = append([]JWK(nil), k.Keys...)
		c.RevokedKids = append([]string(nil), k.RevokedKids...)
		change(&c)
		if d2, _ := c.Digest(); d2 == want {
			t.Errorf("changing %s left the digest unchanged", name)
		}
	}
}
