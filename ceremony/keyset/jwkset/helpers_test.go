package jwkset

import (
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"sync"
	"testing"
)

var b64 = base64.RawURLEncoding.EncodeToString

// edKey is a deterministic Ed25519 public JWK; seed picks the key.
func edKey(kid string, seed byte) JWK {
	s := make([]byte, ed25519.SeedSize)
	s[0] = seed
	pub := ed25519.NewKeyFromSeed(s).Public().(ed25519.PublicKey)
	return JWK{Kty: KtyOKP, Kid: kid, Alg: AlgEdDSA, Crv: CrvEd25519, X: b64(pub)}
}

// ecKey is a deterministic P-256 public JWK; seed picks the key.
func ecKey(kid string, seed byte) JWK {
	s := make([]byte, 32)
	s[31] = seed
	priv, err := ecdh.P256().NewPrivateKey(s)
	if err != nil {
		panic(err)
	}
	p := priv.PublicKey().Bytes() // 0x04 || x || y
	return JWK{Kty: KtyEC, Kid: kid, Alg: AlgES256, Crv: CrvP256, X: b64(p[1:33]), Y: b64(p[33:])}
}

var rsaOnce = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

// rsaKey is a 2048-bit RSA public JWK (one per test process).
func rsaKey(kid string) JWK {
	k := rsaOnce()
	return JWK{Kty: KtyRSA, Kid: kid, Alg: AlgRS256, N: b64(k.N.Bytes()), E: b64(big.NewInt(int64(k.E)).Bytes())}
}

// doc builds a keyset document as a generic map, so a test can break it.
func doc(gen int64, keys []JWK, revoked []string) map[string]any {
	var ks []any
	for _, k := range keys {
		ks = append(ks, jwkMap(k))
	}
	if revoked == nil {
		revoked = []string{}
	}
	return map[string]any{"generation": gen, "keys": ks, "revokedKids": revoked}
}

// jwkMap is a JWK as a generic map.
func jwkMap(k JWK) map[string]any {
	raw, _ := json.Marshal(k)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return m
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
