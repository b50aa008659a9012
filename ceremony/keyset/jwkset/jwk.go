package jwkset

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"encoding/base64"
	"math/big"
	"regexp"
)

// Key kinds: the only kty / crv / alg combinations accepted.
const (
	KtyOKP = "OKP"
	KtyEC  = "EC"
	KtyRSA = "RSA"

	AlgEdDSA = "EdDSA"
	AlgES256 = "ES256"
	AlgRS256 = "RS256"

	CrvEd25519 = "Ed25519"
	CrvP256    = "P-256"

	// MinRSABits is the smallest RSA modulus accepted.
	MinRSABits = 2048
	// MaxRSABits is the largest RSA modulus accepted.
	MaxRSABits = 16384
)

// privateMembers are JWK members that carry private or symmetric key
// material (RFC 7518 §6.2.2, §6.3.2, §6.4.1). Their presence is refused
// before any other check, so the error says what is wrong.
var privateMembers = []string{"d", "p", "q", "dp", "dq", "qi", "oth", "k"}

// allowedMembers are the members a JWK of each kty may have.
var allowedMembers = map[string][]string{
	KtyOKP: {"kty", "kid", "alg", "use", "crv", "x"},
	KtyEC:  {"kty", "kid", "alg", "use", "crv", "x", "y"},
	KtyRSA: {"kty", "kid", "alg", "use", "n", "e"},
}

var b64RE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// decodeB64 decodes base64url without padding, refusing padding, white
// space, line breaks and non-zero trailing bits.
func decodeB64(field, s string) ([]byte, error) {
	if !b64RE.MatchString(s) {
		return nil, invalidf("%s: not base64url without padding", field)
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, invalidf("%s: not base64url without padding: %v", field, err)
	}
	return b, nil
}

// Validate checks one public key: a known kty with its crv and the one
// alg that matches it, a valid kid, use empty or "sig", and key material
// that is well-formed — Ed25519 x of 32 bytes; P-256 x and y of 32 bytes
// each, a point on the curve; RSA n of MinRSABits to MaxRSABits bits and
// an odd e from 3 to 2^31-1, both without leading zero bytes. field names
// the key in errors.
func (j JWK) Validate(field string) error {
	if err := checkKid(field+".kid", j.Kid); err != nil {
		return err
	}
	if j.Use != "" && j.Use != "sig" {
		return invalidf("%s.use: %q; only \"sig\" (or no use) is allowed", field, j.Use)
	}
	switch j.Kty {
	case KtyOKP:
		return j.validateOKP(field)
	case KtyEC:
		return j.validateEC(field)
	case KtyRSA:
		return j.validateRSA(field)
	default:
		return invalidf("%s.kty: %q; want %q (Ed25519), %q (P-256) or %q", field, j.Kty, KtyOKP, KtyEC, KtyRSA)
	}
}

func (j JWK) validateOKP(field string) error {
	if j.Crv != CrvEd25519 {
		return invalidf("%s.crv: %q; an OKP key must be %q", field, j.Crv, CrvEd25519)
	}
	if j.Alg != AlgEdDSA {
		return invalidf("%s.alg: %q does not match an %s key; want %q", field, j.Alg, CrvEd25519, AlgEdDSA)
	}
	if j.Y != "" || j.N != "" || j.E != "" {
		return invalidf("%s: an OKP key has only crv and x", field)
	}
	x, err := decodeB64(field+".x", j.X)
	if err != nil {
		return err
	}
	if len(x) != ed25519.PublicKeySize {
		return invalidf("%s.x: %d bytes; an Ed25519 public key is %d", field, len(x), ed25519.PublicKeySize)
	}
	return nil
}

func (j JWK) validateEC(field string) error {
	if j.Crv != CrvP256 {
		return invalidf("%s.crv: %q; an EC key must be %q", field, j.Crv, CrvP256)
	}
	if j.Alg != AlgES256 {
		return invalidf("%s.alg: %q does not match a %s key; want %q", field, j.Alg, CrvP256, AlgES256)
	}
	if j.N != "" || j.E != "" {
		return invalidf("%s: an EC key has only crv, x and y", field)
	}
	x, err := decodeB64(field+".x", j.X)
	if err != nil {
		return err
	}
	y, err := decodeB64(field+".y", j.Y)
	if err != nil {
		return err
	}
	if len(x) != 32 || len(y) != 32 {
		return invalidf("%s: x and y of a P-256 key are 32 bytes each, not %d and %d", field, len(x), len(y))
	}
	point := append(append([]byte{4}, x...), y...)
	if _, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), point); err != nil {
		return invalidf("%s: x, y is not a point on P-256", field)
	}
	return nil
}

func (j JWK) validateRSA(field string) error {
	if j.Alg != AlgRS256 {
		return invalidf("%s.alg: %q does not match an RSA key; want %q", field, j.Alg, AlgRS256)
	}
	if j.Crv != "" || j.X != "" || j.Y != "" {
		return invalidf("%s: an RSA key has only n and e", field)
	}
	nb, err := decodeB64(field+".n", j.N)
	if err != nil {
		return err
	}
	eb, err := decodeB64(field+".e", j.E)
	if err != nil {
		return err
	}
	if nb[0] == 0 || eb[0] == 0 {
		return invalidf("%s: n and e must not start with a zero byte (RFC 7518 §6.3.1)", field)
	}
	n := new(big.Int).SetBytes(nb)
	if bits := n.BitLen(); bits < MinRSABits || bits > MaxRSABits {
		return invalidf("%s.n: a %d-bit modulus; RSA keys must have %d to %d bits", field, bits, MinRSABits, MaxRSABits)
	}
	if n.Bit(0) == 0 {
		return invalidf("%s.n: an even modulus is not an RSA modulus", field)
	}
	e := new(big.Int).SetBytes(eb)
	if !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31-1 || e.Bit(0) == 0 {
		return invalidf("%s.e: the exponent must be odd, from 3 to 2^31-1", field)
	}
	return nil
}
