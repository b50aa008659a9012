package jwkset

import (
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
)

// Thumbprint is the key's RFC 7638 JWK thumbprint: the base64url (without
// padding) SHA-256 of the JSON object of the key's required members only,
// in lexicographic order and without white space — OKP: crv, kty, x; EC:
// crv, kty, x, y; RSA: e, kty, n. kid, alg and use are not part of it, so
// it names the key material whatever key ID it is published under. It is
// defined for a key that passes Validate (every value is ASCII).
func (j JWK) Thumbprint() string {
	var members [][2]string
	switch j.Kty {
	case KtyRSA:
		members = [][2]string{{"e", j.E}, {"kty", j.Kty}, {"n", j.N}}
	case KtyEC:
		members = [][2]string{{"crv", j.Crv}, {"kty", j.Kty}, {"x", j.X}, {"y", j.Y}}
	default:
		members = [][2]string{{"crv", j.Crv}, {"kty", j.Kty}, {"x", j.X}}
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(m[0]) + ":" + strconv.Quote(m[1]))
	}
	b.WriteByte('}')
	sum := sha256.Sum256([]byte(b.String()))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
