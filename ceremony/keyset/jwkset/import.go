package jwkset

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"math/big"

	"golang.org/x/crypto/ssh"
)

// ParsePublicKey reads one public key file as users have them: one PEM
// block "PUBLIC KEY" (PKIX, `openssl pkey -pubout`) or "RSA PUBLIC KEY"
// (PKCS#1), or one OpenSSH public key line (`ssh-ed25519 AAAA… comment`,
// as in a .pub or authorized_keys file; options are refused). A private
// key, a certificate or anything else is invalid; so is a key of a kind
// the keyset does not hold. name is the file in errors.
func ParsePublicKey(name string, data []byte) (crypto.PublicKey, error) {
	trimmed := bytes.TrimSpace(data)
	if block, rest := pem.Decode(trimmed); block != nil {
		if len(bytes.TrimSpace(rest)) > 0 {
			return nil, invalidf("%s: more than one PEM block; a key file holds one public key", name)
		}
		return parsePEM(name, block)
	}
	if bytes.Contains(trimmed, []byte("PRIVATE KEY")) {
		return nil, invalidf("%s: holds a private key; give the public key (ssh-keygen -y, openssl pkey -pubout) and treat this one as exposed", name)
	}
	if bytes.Contains(trimmed, []byte("\n")) {
		return nil, invalidf("%s: more than one line; an OpenSSH public key file holds one key", name)
	}
	pk, _, options, rest, err := ssh.ParseAuthorizedKey(trimmed)
	if err != nil {
		return nil, invalidf("%s: neither a PEM public key nor an OpenSSH public key line: %v", name, err)
	}
	if len(options) > 0 || len(rest) > 0 {
		return nil, invalidf("%s: an authorized_keys line with options; give the bare public key", name)
	}
	ck, ok := pk.(ssh.CryptoPublicKey)
	if !ok {
		return nil, invalidf("%s: an OpenSSH %s key is not a plain public key (certificates are not keyset keys)", name, pk.Type())
	}
	return ck.CryptoPublicKey(), nil
}

func parsePEM(name string, block *pem.Block) (crypto.PublicKey, error) {
	switch block.Type {
	case "PUBLIC KEY":
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, invalidf("%s: PUBLIC KEY: %v", name, err)
		}
		return k, nil
	case "RSA PUBLIC KEY":
		k, err := x509.ParsePKCS1PublicKey(block.Bytes)
		if err != nil {
			return nil, invalidf("%s: RSA PUBLIC KEY: %v", name, err)
		}
		return k, nil
	default:
		return nil, invalidf("%s: a PEM %q block; want PUBLIC KEY (openssl pkey -pubout) or RSA PUBLIC KEY, never a private key", name, block.Type)
	}
}

// FromPublicKey is pub as a keyset JWK with key ID kid — or, when kid is
// empty, its RFC 7638 thumbprint — and use "sig". The result is validated
// as a keyset key: an RSA modulus outside the allowed sizes, a P-384 key or
// an X25519 key is invalid.
func FromPublicKey(field string, pub crypto.PublicKey, kid string) (JWK, error) {
	b64 := base64.RawURLEncoding.EncodeToString
	var j JWK
	switch k := pub.(type) {
	case ed25519.PublicKey:
		j = JWK{Kty: KtyOKP, Crv: CrvEd25519, Alg: AlgEdDSA, X: b64(k)}
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return JWK{}, invalidf("%s: an EC key on %s; keyset EC keys are P-256", field, k.Curve.Params().Name)
		}
		raw, err := k.Bytes() // 0x04 || X || Y, each 32 bytes
		if err != nil {
			return JWK{}, invalidf("%s: %v", field, err)
		}
		j = JWK{Kty: KtyEC, Crv: CrvP256, Alg: AlgES256, X: b64(raw[1:33]), Y: b64(raw[33:])}
	case *rsa.PublicKey:
		j = JWK{Kty: KtyRSA, Alg: AlgRS256, N: b64(k.N.Bytes()), E: b64(big.NewInt(int64(k.E)).Bytes())}
	default:
		return JWK{}, invalidf("%s: a %T is not a keyset key (Ed25519, P-256 or RSA)", field, pub)
	}
	j.Use = "sig"
	j.Kid = kid
	if j.Kid == "" {
		j.Kid = j.Thumbprint()
	}
	if err := j.Validate(field); err != nil {
		return JWK{}, err
	}
	return j, nil
}

// Initial is generation 1 of a keyset holding keys, validated.
func Initial(keys []JWK) (*Keyset, error) {
	k := &Keyset{Generation: 1, Keys: keys, RevokedKids: []string{}}
	if err := k.Validate(); err != nil {
		return nil, err
	}
	return k, nil
}
