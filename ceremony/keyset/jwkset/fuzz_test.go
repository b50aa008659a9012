package jwkset

import (
	"reflect"
	"testing"

	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// FuzzParse: Parse never panics, and whatever it accepts is a valid
// generation that survives Encode and whose digest is the digest of the
// input's own canonical JSON.
func FuzzParse(f *testing.F) {
	f.Add(mustJSON(f, base()))
	f.Add(mustJSON(f, doc(1, []JWK{edKey("a", 1)}, nil)))
	f.Add([]byte(`{"generation":1,"keys":[{"kty":"EC","kid":"k","alg":"ES256","crv":"P-256","x":"","y":""}],"revokedKids":["a"]}`))
	f.Add([]byte(`{"generation":1,"generation":1}`))
	f.Add([]byte(`{"keys":[[{"a":[]}]]}`))
	f.Add([]byte("\xef\xbb\xbf{}"))
	f.Add([]byte(`{"generation":9007199254740992,"keys":[],"revokedKids":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := Parse(data)
		if err != nil {
			return
		}
		if err := k.Validate(); err != nil {
			t.Fatalf("Parse accepted an invalid keyset: %v", err)
		}
		d, err := k.Digest()
		if err != nil {
			t.Fatal(err)
		}
		c, err := canon.CanonicalizeJSON(data)
		if err != nil {
			t.Fatalf("accepted input has no canonical form: %v", err)
		}
		if canon.DigestBytes(DomainKeyset, c) != d {
			t.Fatalf("Digest %s differs from the input's canonical digest", d)
		}
		enc, err := k.Encode()
		if err != nil {
			t.Fatal(err)
		}
		k2, err := Parse(enc)
		if err != nil {
			t.Fatalf("Parse(Encode) = %v", err)
		}
		if !reflect.DeepEqual(k, k2) {
			t.Fatalf("Encode round trip changed the keyset:\n%+v\n%+v", k, k2)
		}
	})
}

// FuzzParseJWK: ParseJWK never panics, and a key it accepts validates.
func FuzzParseJWK(f *testing.F) {
	f.Add(mustJSON(f, jwkMap(edKey("a", 1))))
	f.Add(mustJSON(f, jwkMap(ecKey("b", 1))))
	f.Add(mustJSON(f, jwkMap(rsaKey("c"))))
	f.Add([]byte(`{"kty":"OKP","kid":"a","alg":"EdDSA","crv":"Ed25519","x":"AAAA","d":"AAAA"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := ParseJWK(data)
		if err != nil {
			return
		}
		if err := j.Validate("key"); err != nil {
			t.Fatalf("ParseJWK accepted an invalid key: %v", err)
		}
	})
}
