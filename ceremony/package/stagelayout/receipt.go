package stagelayout

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"

	"github.com/qinglong/kubectl-ql3/ceremony/package/intent"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/strictjson"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// StatementSchema is the stage receipt statement's schema member.
const StatementSchema = "qinglong/plugin-package-stage-receipt@v1"

// SigningDomain separates stage receipt signatures from every other
// signature: the signed bytes are "kubectl-ql3/stage-receipt/v1" 0x00
// followed by the statement's canonical JSON without its signature.
const SigningDomain = "stage-receipt"

// MaxStatementBytes bounds the stage receipt blob.
const MaxStatementBytes = 16 << 10

// Statement is the stage receipt blob: what the stage signed about one
// package manifest. Signature is base64 (standard, padded) of the 64-byte
// Ed25519 signature over SigningInput.
type Statement struct {
	Schema                string `json:"schema"`
	StageReference        string `json:"stageReference"`
	LockDigest            string `json:"lockDigest"`
	ContentDigest         string `json:"contentDigest"`
	AdapterEvidenceDigest string `json:"adapterEvidenceDigest"`
	Signature             string `json:"signature"`
}

var statementMembers = []string{"schema", "stageReference", "lockDigest", "contentDigest", "adapterEvidenceDigest", "signature"}

// SigningInput is the exact byte string a stage key signs for s:
//
//	"kubectl-ql3/stage-receipt/v1" 0x00 canonical({adapterEvidenceDigest, contentDigest, lockDigest, schema, stageReference})
func (s Statement) SigningInput() ([]byte, error) {
	unsigned := map[string]string{
		"schema": s.Schema, "stageReference": s.StageReference, "lockDigest": s.LockDigest,
		"contentDigest": s.ContentDigest, "adapterEvidenceDigest": s.AdapterEvidenceDigest,
	}
	c, err := canon.Canonical(unsigned)
	if err != nil {
		return nil, err
	}
	return append([]byte("kubectl-ql3/"+SigningDomain+"/v1\x00"), c...), nil
}

// Sign fills s.Signature with key's signature and returns the statement
// blob: its canonical JSON. Stage tooling and tests use it; Verify never
// signs.
func (s *Statement) Sign(key ed25519.PrivateKey) ([]byte, error) {
	msg, err := s.SigningInput()
	if err != nil {
		return nil, err
	}
	s.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(key, msg))
	return canon.Canonical(s)
}

// canonical is the statement blob's bytes: its canonical JSON.
func (s Statement) canonical() ([]byte, error) { return canon.Canonical(s) }

// ParseStatement reads a stage receipt blob strictly: one JSON object with
// exactly the Statement members, all strings, the schema exact, the
// digests and reference well-formed and a 64-byte signature. Errors are
// fail.Conflict: the blob was read intact (its digest matched) and does
// not say what a stage receipt says.
func ParseStatement(data []byte) (Statement, error) {
	var s Statement
	if len(data) > MaxStatementBytes {
		return s, conflictf("stage receipt: %d bytes, at most %d", len(data), MaxStatementBytes)
	}
	m, err := strictjson.Object(data, statementMembers)
	if err != nil {
		return s, conflictf("stage receipt: %v", err)
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"schema", &s.Schema}, {"stageReference", &s.StageReference}, {"lockDigest", &s.LockDigest},
		{"contentDigest", &s.ContentDigest}, {"adapterEvidenceDigest", &s.AdapterEvidenceDigest}, {"signature", &s.Signature}} {
		v, ok := strictjson.String(m[f.name])
		if !ok {
			return s, conflictf("stage receipt: %s is not a JSON string", f.name)
		}
		*f.dst = v
	}
	if s.Schema != StatementSchema {
		return s, conflictf("stage receipt: schema %q, want %q", strictjson.Clip(s.Schema), StatementSchema)
	}
	if err := intent.CheckReference("stageReference", s.StageReference); err != nil {
		return s, conflictf("stage receipt: %v", err)
	}
	for _, v := range []string{s.LockDigest, s.ContentDigest, s.AdapterEvidenceDigest} {
		if !canon.IsDigest(v) {
			return s, conflictf("stage receipt: %q is not a digest", strictjson.Clip(v))
		}
	}
	if sig, err := base64.StdEncoding.Strict().DecodeString(s.Signature); err != nil || len(sig) != ed25519.SignatureSize {
		return s, conflictf("stage receipt: signature is not base64 of %d bytes", ed25519.SignatureSize)
	}
	return s, nil
}

// VerifySignature reports which trusted key signed s; none is
// fail.Conflict.
func (s Statement) VerifySignature(trusted []ed25519.PublicKey) (int, error) {
	msg, err := s.SigningInput()
	if err != nil {
		return -1, conflictf("stage receipt: %v", err)
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(s.Signature)
	if err != nil {
		return -1, conflictf("stage receipt: signature is not base64")
	}
	for i, k := range trusted {
		if len(k) == ed25519.PublicKeySize && ed25519.Verify(k, msg, sig) {
			return i, nil
		}
	}
	return -1, conflictf("stage receipt for %s is signed by none of the %d trusted keys (--trusted-key); the stage is not authentic for this verifier", s.StageReference, len(trusted))
}

// ParsePublicKey reads a trusted key file: one PEM block "PUBLIC KEY"
// holding a PKIX (SubjectPublicKeyInfo) Ed25519 key, as `openssl pkey
// -pubout` writes it. Errors are fail.Invalid naming file.
func ParsePublicKey(file string, data []byte) (ed25519.PublicKey, error) {
	block, rest := pem.Decode(data)
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, fail.Errorf(fail.Invalid, "trusted key %s: no PEM \"PUBLIC KEY\" block; write an Ed25519 key as `openssl pkey -pubout` does", file)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fail.Errorf(fail.Invalid, "trusted key %s: data after the PEM block; give one key per file", file)
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "trusted key %s: %v", file, err)
	}
	ek, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fail.Errorf(fail.Invalid, "trusted key %s: a %T, not an Ed25519 key", file, k)
	}
	return ek, nil
}

func conflictf(format string, args ...any) error {
	return fail.Errorf(fail.Conflict, "stage evidence: "+format, args...)
}

func unavailablef(format string, args ...any) error {
	return fail.Errorf(fail.Unavailable, "stage evidence: "+format, args...)
}
