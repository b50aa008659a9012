package jwkset

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// base is a valid generation with one key of each kind and one revocation.
func base() map[string]any {
	return doc(3, []JWK{edKey("ed-1", 1), ecKey("ec-1", 1), rsaKey("rsa-1")}, []string{"old-0"})
}

// key returns keys[i] of a document built by base.
func key(d map[string]any, i int) map[string]any { return d["keys"].([]any)[i].(map[string]any) }

func TestParseRules(t *testing.T) {
	ed, ec, rs := 0, 1, 2
	tests := []struct {
		name    string
		mutate  func(d map[string]any) // applied to base(); or
		text    string                 // the document itself
		wantErr string                 // "" = valid
	}{
		{name: "valid: one key of each kind", mutate: func(map[string]any) {}},
		{name: "valid: use sig", mutate: func(d map[string]any) { key(d, ed)["use"] = "sig" }},
		{name: "valid: no revocations", mutate: func(d map[string]any) { d["revokedKids"] = []string{} }},
		{name: "valid: eight keys", mutate: func(d map[string]any) {
			d["keys"] = doc(1, []JWK{edKey("a", 1), edKey("b", 2), edKey("c", 3), edKey("d", 4), edKey("e", 5), edKey("f", 6), ecKey("g", 1), rsaKey("h")}, nil)["keys"]
		}},
		{name: "valid: generation 2^53-1", mutate: func(d map[string]any) { d["generation"] = int64(MaxGeneration) }},

		// text
		{name: "not UTF-8", text: "{\"generation\":1,\"keys\":[],\"revokedKids\":[\"\xff\"]}", wantErr: "not valid UTF-8"},
		{name: "byte order mark", text: "\xef\xbb\xbf{}", wantErr: "byte order mark"},
		{name: "not JSON", text: `{"generation":1,`, wantErr: "not JSON"},
		{name: "empty", text: "  ", wantErr: "empty"},
		{name: "two values", text: `{} {}`, wantErr: "more than one JSON value"},
		{name: "not an object", text: `[]`, wantErr: "not a JSON object"},
		{name: "null", text: `null`, wantErr: "not a JSON object"},
		{name: "too deep", text: `{"keys":[[{"a":[]}]]}`, wantErr: "nested deeper"},
		{name: "over the hard cap", text: `{"generation":1,"keys":[],"revokedKids":[]}` + strings.Repeat(" ", HardMaxBytes), wantErr: "hard cap"},
		{name: "duplicate top member", text: `{"generation":1,"generation":2,"keys":[],"revokedKids":[]}`, wantErr: `member "generation" appears twice`},
		{name: "duplicate member spelled with an escape", text: `{"generation":1,"gener\u0061tion":2,"keys":[],"revokedKids":[]}`, wantErr: `member "generation" appears twice`},
		{name: "generation of 20 digits", text: `{"generation":12345678901234567890,"keys":[],"revokedKids":[]}`, wantErr: "generation: 12345678901234567890 is larger than"},
		{name: "lone surrogate in a kid", text: fmt.Sprintf(`{"generation":1,"keys":[{"kty":"OKP","kid":"a","alg":"EdDSA","crv":"Ed25519","x":%q}],"revokedKids":["b\ud800"]}`, edKey("a", 1).X), wantErr: "revokedKids[0]: key ID"},
		{name: "duplicate jwk member", text: fmt.Sprintf(`{"generation":1,"keys":[{"kty":"OKP","kid":"a","kid":"b","alg":"EdDSA","crv":"Ed25519","x":%q}],"revokedKids":[]}`, edKey("a", 1).X), wantErr: `member "kid" appears twice`},

		// document shape
		{name: "unknown top member", mutate: func(d map[string]any) { d["issuer"] = "x" }, wantErr: `unknown member "issuer"`},
		{name: "generation missing", mutate: func(d map[string]any) { delete(d, "generation") }, wantErr: `"generation" is missing`},
		{name: "keys missing", mutate: func(d map[string]any) { delete(d, "keys") }, wantErr: `"keys" is missing`},
		{name: "revokedKids missing", mutate: func(d map[string]any) { delete(d, "revokedKids") }, wantErr: `"revokedKids" is missing`},
		{name: "generation zero", mutate: func(d map[string]any) { d["generation"] = 0 }, wantErr: "generation: 0 is not a positive integer"},
		{name: "generation negative", mutate: func(d map[string]any) { d["generation"] = -1 }, wantErr: "generation: -1 is not"},
		{name: "generation fraction", mutate: func(d map[string]any) { d["generation"] = 1.5 }, wantErr: "generation: 1.5 is not"},
		{name: "generation exponent", text: `{"generation":1e3,"keys":[],"revokedKids":[]}`, wantErr: "generation: 1e3 is not"},
		{name: "generation leading zero", text: `{"generation":01,"keys":[],"revokedKids":[]}`, wantErr: "not JSON"},
		{name: "generation string", mutate: func(d map[string]any) { d["generation"] = "3" }, wantErr: `generation: "3" is not`},
		{name: "generation above 2^53-1", mutate: func(d map[string]any) { d["generation"] = int64(MaxGeneration) + 1 }, wantErr: "larger than"},
		{name: "keys null", mutate: func(d map[string]any) { d["keys"] = nil }, wantErr: "keys: null is not a JSON array"},
		{name: "keys object", mutate: func(d map[string]any) { d["keys"] = map[string]any{} }, wantErr: "keys: {} is not a JSON array"},
		{name: "no active key", mutate: func(d map[string]any) { d["keys"] = []any{} }, wantErr: "no active key"},
		{name: "nine keys", mutate: func(d map[string]any) {
			d["keys"] = doc(1, []JWK{edKey("a", 1), edKey("b", 2), edKey("c", 3), edKey("d", 4), edKey("e", 5), edKey("f", 6), edKey("g", 7), edKey("h", 8), edKey("i", 9)}, nil)["keys"]
		}, wantErr: "9 keys, at most 8"},
		{name: "key not an object", mutate: func(d map[string]any) { d["keys"] = []any{"k"} }, wantErr: "keys[0]: \"k\" is not a JSON object"},

		// private and unknown members
		{name: "ed25519 private d", mutate: func(d map[string]any) { key(d, ed)["d"] = "AAAA" }, wantErr: "keys[0].d: a private key member"},
		{name: "ec private d", mutate: func(d map[string]any) { key(d, ec)["d"] = "AAAA" }, wantErr: "keys[1].d: a private key member"},
		{name: "rsa private p", mutate: func(d map[string]any) { key(d, rs)["p"] = "AAAA" }, wantErr: "keys[2].p: a private key member"},
		{name: "rsa private qi", mutate: func(d map[string]any) { key(d, rs)["qi"] = "AAAA" }, wantErr: "keys[2].qi: a private key member"},
		{name: "symmetric k", mutate: func(d map[string]any) {
			d["keys"] = []any{map[string]any{"kty": "oct", "kid": "s", "alg": "HS256", "k": "AAAA"}}
		}, wantErr: "keys[0].k: a private key member"},
		{name: "kty oct", mutate: func(d map[string]any) { key(d, ed)["kty"] = "oct" }, wantErr: `keys[0].kty: "oct"`},
		{name: "kty missing", mutate: func(d map[string]any) { delete(key(d, ed), "kty") }, wantErr: "keys[0].kty: nothing is not a JSON string"},
		{name: "unknown jwk member", mutate: func(d map[string]any) { key(d, rs)["x5c"] = []string{"MII"} }, wantErr: "keys[2].x5c: unknown member"},
		{name: "y on an OKP key", mutate: func(d map[string]any) { key(d, ed)["y"] = key(d, ec)["y"] }, wantErr: "keys[0].y: unknown member"},
		{name: "key_ops", mutate: func(d map[string]any) { key(d, ed)["key_ops"] = []string{"verify"} }, wantErr: "keys[0].key_ops: unknown member"},

		// kid and use
		{name: "kid missing", mutate: func(d map[string]any) { delete(key(d, ec), "kid") }, wantErr: "keys[1].kid: missing"},
		{name: "kid empty", mutate: func(d map[string]any) { key(d, ec)["kid"] = "" }, wantErr: `keys[1].kid: key ID ""`},
		{name: "kid with a space", mutate: func(d map[string]any) { key(d, ec)["kid"] = "a b" }, wantErr: `keys[1].kid: key ID "a b"`},
		{name: "kid too long", mutate: func(d map[string]any) { key(d, ec)["kid"] = strings.Repeat("k", MaxKidLen+1) }, wantErr: "keys[1].kid: key ID"},
		{name: "kid a number", mutate: func(d map[string]any) { key(d, ec)["kid"] = 7 }, wantErr: "keys[1].kid: 7 is not a JSON string"},
		{name: "duplicate kid", mutate: func(d map[string]any) { key(d, ec)["kid"] = "ed-1" }, wantErr: `keys[1]: duplicate key ID "ed-1"`},
		{name: "same key twice", mutate: func(d map[string]any) { d["keys"] = append(d["keys"].([]any), jwkMap(edKey("ed-2", 1))) }, wantErr: "keys[3]: the same public key as keys[0]"},
		{name: "use enc", mutate: func(d map[string]any) { key(d, ed)["use"] = "enc" }, wantErr: `keys[0].use: "enc"`},
		{name: "use empty", mutate: func(d map[string]any) { key(d, ed)["use"] = "" }, wantErr: "keys[0].use: empty"},

		// algorithm against key
		{name: "alg missing", mutate: func(d map[string]any) { delete(key(d, ed), "alg") }, wantErr: "keys[0].alg: missing"},
		{name: "Ed25519 key with ES256", mutate: func(d map[string]any) { key(d, ed)["alg"] = "ES256" }, wantErr: `keys[0].alg: "ES256" does not match`},
		{name: "P-256 key with RS256", mutate: func(d map[string]any) { key(d, ec)["alg"] = "RS256" }, wantErr: `keys[1].alg: "RS256" does not match`},
		{name: "RSA key with EdDSA", mutate: func(d map[string]any) { key(d, rs)["alg"] = "EdDSA" }, wantErr: `keys[2].alg: "EdDSA" does not match`},
		{name: "RSA key with PS256", mutate: func(d map[string]any) { key(d, rs)["alg"] = "PS256" }, wantErr: `keys[2].alg: "PS256" does not match`},
		{name: "OKP X25519", mutate: func(d map[string]any) { key(d, ed)["crv"] = "X25519" }, wantErr: `keys[0].crv: "X25519"`},
		{name: "EC P-384", mutate: func(d map[string]any) { key(d, ec)["crv"] = "P-384" }, wantErr: `keys[1].crv: "P-384"`},

		// key material
		{name: "ed25519 x 31 bytes", mutate: func(d map[string]any) { key(d, ed)["x"] = b64(make([]byte, 31)) }, wantErr: "keys[0].x: 31 bytes"},
		{name: "x padded", mutate: func(d map[string]any) { key(d, ed)["x"] = key(d, ed)["x"].(string) + "=" }, wantErr: "keys[0].x: not base64url without padding"},
		{name: "x with a line break", mutate: func(d map[string]any) { x := key(d, ed)["x"].(string); key(d, ed)["x"] = x[:20] + "\n" + x[20:] }, wantErr: "keys[0].x: not base64url"},
		{name: "x standard base64", mutate: func(d map[string]any) { key(d, ed)["x"] = strings.Repeat("+", 43) }, wantErr: "keys[0].x: not base64url"},
		{name: "x trailing bits", mutate: func(d map[string]any) { x := key(d, ed)["x"].(string); key(d, ed)["x"] = x[:42] + "B" }, wantErr: "keys[0].x: not base64url"},
		{name: "x empty", mutate: func(d map[string]any) { key(d, ed)["x"] = "" }, wantErr: "keys[0].x: not base64url"},
		{name: "P-256 point off the curve", mutate: func(d map[string]any) { key(d, ec)["y"] = key(d, ec)["x"] }, wantErr: "keys[1]: x, y is not a point on P-256"},
		{name: "P-256 x 33 bytes", mutate: func(d map[string]any) { key(d, ec)["x"] = b64(make([]byte, 33)) }, wantErr: "keys[1]: x and y of a P-256 key are 32 bytes"},
		{name: "P-256 y missing", mutate: func(d map[string]any) { delete(key(d, ec), "y") }, wantErr: "keys[1].y: missing"},
		{name: "RSA 1024 bits", mutate: func(d map[string]any) { n := rsaOnce().N.Bytes(); key(d, rs)["n"] = b64(n[:128]) }, wantErr: "keys[2].n: a 1024-bit modulus"},
		{name: "RSA 2047 bits", mutate: func(d map[string]any) { n := rsaOnce().N.Bytes(); n[0] = 0x41; key(d, rs)["n"] = b64(n) }, wantErr: "keys[2].n: a 2047-bit modulus"},
		{name: "RSA n leading zero", mutate: func(d map[string]any) { key(d, rs)["n"] = b64(append([]byte{0}, rsaOnce().N.Bytes()...)) }, wantErr: "keys[2]: n and e must not start with a zero byte"},
		{name: "RSA even modulus", mutate: func(d map[string]any) { n := rsaOnce().N.Bytes(); n[len(n)-1] &^= 1; key(d, rs)["n"] = b64(n) }, wantErr: "keys[2].n: an even modulus"},
		{name: "RSA e = 1", mutate: func(d map[string]any) { key(d, rs)["e"] = b64([]byte{1}) }, wantErr: "keys[2].e: the exponent must be odd"},
		{name: "RSA e even", mutate: func(d map[string]any) { key(d, rs)["e"] = b64([]byte{1, 0, 0}) }, wantErr: "keys[2].e: the exponent must be odd"},
		{name: "RSA e 2^32+1", mutate: func(d map[string]any) { key(d, rs)["e"] = b64([]byte{1, 0, 0, 0, 1}) }, wantErr: "keys[2].e: the exponent must be odd"},
		{name: "RSA with crv", mutate: func(d map[string]any) { key(d, rs)["crv"] = "P-256" }, wantErr: "keys[2].crv: unknown member"},

		// revocations
		{name: "revokedKids null", mutate: func(d map[string]any) { d["revokedKids"] = nil }, wantErr: "revokedKids: null is not a JSON array"},
		{name: "revokedKids a string", mutate: func(d map[string]any) { d["revokedKids"] = "old-0" }, wantErr: `revokedKids: "old-0" is not a JSON array`},
		{name: "revoked kid a number", mutate: func(d map[string]any) { d["revokedKids"] = []any{1} }, wantErr: "revokedKids[0]: 1 is not a JSON string"},
		{name: "revoked kid bad syntax", mutate: func(d map[string]any) { d["revokedKids"] = []any{"a\tb"} }, wantErr: "revokedKids[0]: key ID"},
		{name: "65 revoked kids", mutate: func(d map[string]any) { d["revokedKids"] = kids("r", 65) }, wantErr: "revokedKids: 65 entries, at most 64"},
		{name: "64 revoked kids is valid", mutate: func(d map[string]any) { d["revokedKids"] = kids("r", 64) }},
		{name: "duplicate revoked kid", mutate: func(d map[string]any) { d["revokedKids"] = []string{"a", "b", "a"} }, wantErr: `revokedKids[2]: "a" is already revoked`},
		{name: "revoked kid still active", mutate: func(d map[string]any) { d["revokedKids"] = []string{"old-0", "ec-1"} }, wantErr: `revokedKids[1]: "ec-1" is also an active key`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte(tt.text)
			if tt.mutate != nil {
				d := base()
				tt.mutate(d)
				data = mustJSON(t, d)
			}
			k, err := Parse(data)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if err := k.Validate(); err != nil {
					t.Fatalf("a parsed keyset does not validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse accepted it, want an error containing %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %q does not contain %q", err, tt.wantErr)
			}
			if !fail.Is(err, fail.Invalid) {
				t.Fatalf("error class %v, want invalid", fail.ClassOf(err))
			}
		})
	}
}

func kids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// A parsed keyset keeps every member: the struct, its digest and the
// file's own canonical JSON agree, whatever the file's member order and
// white space.
func TestParseKeepsEverything(t *testing.T) {
	d := base()
	key(d, 0)["use"] = "sig"
	data := mustJSON(t, d)
	k, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if k.Generation != 3 || len(k.Keys) != 3 || k.Keys[0].Use != "sig" || k.Keys[2].N == "" || len(k.RevokedKids) != 1 || k.RevokedKids[0] != "old-0" {
		t.Fatalf("parsed %+v", k)
	}
	enc, err := k.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(enc, data) {
		t.Fatal("Encode should indent; the test needs two different texts")
	}
	k2, err := Parse(enc)
	if err != nil {
		t.Fatalf("Parse(Encode): %v", err)
	}
	d1, _ := k.Digest()
	d2, _ := k2.Digest()
	if d1 != d2 {
		t.Fatalf("digest changed through Encode: %s != %s", d1, d2)
	}
}

func TestParseJWK(t *testing.T) {
	good := mustJSON(t, jwkMap(ecKey("new", 9)))
	j, err := ParseJWK(good)
	if err != nil || j.Kid != "new" || j.Kty != KtyEC {
		t.Fatalf("ParseJWK = %+v, %v", j, err)
	}
	for _, bad := range []string{`{"kty":"OKP","kid":"a","alg":"EdDSA","crv":"Ed25519","x":"` + edKey("a", 1).X + `","d":"AAAA"}`, `[]`, `{"kty":"RSA","kid":"a","kid":"b"}`} {
		if _, err := ParseJWK([]byte(bad)); !fail.Is(err, fail.Invalid) {
			t.Errorf("ParseJWK(%s) = %v, want invalid", bad, err)
		}
	}
}
