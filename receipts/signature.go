package receipts

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"path/filepath"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/safefile"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// SignatureSchema is the schema of a detached receipt signature.
const SignatureSchema = "qinglong/receipt-signature@v1"

// SignatureSuffix is appended to a receipt file name to name its signature.
const SignatureSuffix = ".sig"

// signaturePrefix starts the signed message, so a receipt signature can
// never be replayed as a signature over anything else.
const signaturePrefix = "kubectl-ql3/receipt-signature/v1\x00"

// Signature is a detached Ed25519 signature over one receipt's digest. Its
// file is the canonical JSON of this struct, with no trailing newline.
type Signature struct {
	Schema        string `json:"schema"`
	KeyID         string `json:"keyId"`
	ReceiptDigest string `json:"receiptDigest"`
	Signature     string `json:"signature"` // standard base64 with padding
}

// TrustedKeys are the public keys a signature may be made by, by key id.
type TrustedKeys map[string]ed25519.PublicKey

// SignedMessage is the exact byte string an Ed25519 receipt signature
// signs: "kubectl-ql3/receipt-signature/v1", a zero byte, then the receipt
// digest ("sha256:" and 64 hex digits) as ASCII.
func SignedMessage(receiptDigest string) []byte {
	return []byte(signaturePrefix + receiptDigest)
}

// KeyID names a public key: "sha256:" and the lowercase hex SHA-256 of its
// PKIX (SubjectPublicKeyInfo) DER encoding. It is a plain SHA-256, not a
// domain-separated digest, so `openssl pkey -pubin -outform DER | sha256sum`
// reproduces it.
func KeyID(pub ed25519.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return canon.DigestPrefix + hex.EncodeToString(sum[:]), nil
}

// Sign returns the signature file's bytes for the sealed receipt r.
func Sign(r *Receipt, key ed25519.PrivateKey) ([]byte, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fail.Errorf(fail.Invalid, "signing key is not an Ed25519 private key")
	}
	if _, err := r.Bytes(); err != nil {
		return nil, err
	}
	id, err := KeyID(key.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, err
	}
	s := Signature{
		Schema:        SignatureSchema,
		KeyID:         id,
		ReceiptDigest: r.SelfDigest,
		Signature:     base64.StdEncoding.EncodeToString(ed25519.Sign(key, SignedMessage(r.SelfDigest))),
	}
	return canon.Canonical(s)
}

// ParseSignature reads a signature file strictly: canonical JSON, known
// schema, well-formed key id, digest and signature. It does not verify the
// signature; see VerifySignature. Every failure is fail.Tamper.
func ParseSignature(data []byte) (*Signature, error) {
	const what = "signature"
	if len(data) == 0 {
		return nil, fail.Errorf(fail.Tamper, "signature is empty")
	}
	if len(data) > MaxFileSize {
		return nil, fail.Errorf(fail.Tamper, "signature is larger than %d bytes", MaxFileSize)
	}
	if err := checkSchema(data, what, SignatureSchema); err != nil {
		return nil, err
	}
	var s Signature
	if err := decodeStrict(data, &s, what); err != nil {
		return nil, err
	}
	want, err := canon.Canonical(s)
	if err != nil {
		return nil, fail.Errorf(fail.Tamper, "signature: %w", err)
	}
	if !bytes.Equal(want, data) {
		return nil, explainNonCanonical(what, data, want)
	}
	if !canon.IsDigest(s.KeyID) {
		return nil, fail.Errorf(fail.Tamper, "signature field %q: %q is not a key id", "keyId", s.KeyID)
	}
	if !canon.IsDigest(s.ReceiptDigest) {
		return nil, fail.Errorf(fail.Tamper, "signature field %q: %q is not a digest", "receiptDigest", s.ReceiptDigest)
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(s.Signature)
	if err != nil || len(raw) != ed25519.SignatureSize || base64.StdEncoding.EncodeToString(raw) != s.Signature {
		return nil, fail.Errorf(fail.Tamper, "signature field %q: is not %d bytes of standard base64", "signature", ed25519.SignatureSize)
	}
	return &s, nil
}

// VerifySignature checks that s is a valid signature over receiptDigest by
// one of the trusted keys. Every failure is fail.Tamper.
func VerifySignature(s *Signature, receiptDigest string, keys TrustedKeys) error {
	if s.ReceiptDigest != receiptDigest {
		return fail.Errorf(fail.Tamper, "signature is for receipt %q, not %q", s.ReceiptDigest, receiptDigest)
	}
	pub, ok := keys[s.KeyID]
	if !ok {
		return fail.Errorf(fail.Tamper, "signature key %q is not a trusted key", s.KeyID)
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(s.Signature)
	if err != nil || !ed25519.Verify(pub, SignedMessage(receiptDigest), raw) {
		return fail.Errorf(fail.Tamper, "signature by key %q does not verify", s.KeyID)
	}
	return nil
}

// LoadSigningKey reads an Ed25519 private key: one PEM block "PRIVATE KEY"
// holding PKCS#8 DER (`openssl genpkey -algorithm ed25519`). Failures are
// fail.Invalid.
func LoadSigningKey(path string) (ed25519.PrivateKey, error) {
	der, err := readPEM(path, "PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "signing key %q: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fail.Errorf(fail.Invalid, "signing key %q: is a %T, not an Ed25519 key", path, k)
	}
	return priv, nil
}

// LoadTrustedKeys reads Ed25519 public keys: each file one PEM block
// "PUBLIC KEY" holding PKIX DER (`openssl pkey -pubout`). Private keys are
// refused: an auditor needs no secret. Failures are fail.Invalid.
func LoadTrustedKeys(paths []string) (TrustedKeys, error) {
	keys := TrustedKeys{}
	for _, path := range paths {
		der, err := readPEM(path, "PUBLIC KEY")
		if err != nil {
			return nil, err
		}
		k, err := x509.ParsePKIXPublicKey(der)
		if err != nil {
			return nil, fail.Errorf(fail.Invalid, "trusted key %q: %w", path, err)
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fail.Errorf(fail.Invalid, "trusted key %q: is a %T, not an Ed25519 key", path, k)
		}
		id, err := KeyID(pub)
		if err != nil {
			return nil, fail.Errorf(fail.Invalid, "trusted key %q: %w", path, err)
		}
		keys[id] = pub
	}
	return keys, nil
}

// MaxKeyFileBytes bounds a signing or trusted key file: an Ed25519 key in
// PEM is about 120 bytes.
const MaxKeyFileBytes = 16 << 10

// readPEM reads a file holding exactly one PEM block of the given type and
// nothing else but white space.
//
// It is read with the hardening of every file that decides what is
// trusted (internal/safefile): a regular file, not a symbolic link, at
// most MaxKeyFileBytes, unchanged while read; a private key owner-only, a
// public key at least not writable by group or others.
func readPEM(path, blockType string) ([]byte, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "key file %q: %w", path, err)
	}
	perm := safefile.NotShared
	if blockType == "PRIVATE KEY" {
		perm = safefile.OwnerOnly
	}
	data, err := safefile.Read(abs, MaxKeyFileBytes, perm)
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	block, rest := pem.Decode(data)
	switch {
	case block == nil:
		return nil, fail.Errorf(fail.Invalid, "key file %q: no PEM block", path)
	case len(bytes.TrimSpace(rest)) > 0:
		return nil, fail.Errorf(fail.Invalid, "key file %q: more than one PEM block", path)
	case block.Type == "PRIVATE KEY" && blockType == "PUBLIC KEY":
		return nil, fail.Errorf(fail.Invalid, "key file %q: is a private key; give its public key (openssl pkey -in KEY -pubout)", path)
	case block.Type != blockType:
		return nil, fail.Errorf(fail.Invalid, "key file %q: PEM block %q is not %q", path, block.Type, blockType)
	case len(block.Headers) > 0:
		return nil, fail.Errorf(fail.Invalid, "key file %q: PEM block has headers", path)
	}
	return block.Bytes, nil
}
