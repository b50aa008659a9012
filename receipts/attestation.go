package receipts

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/intoto"
	"github.com/qinglong/kubectl-ql3/internal/safefile"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// PredicateType is the in-toto predicate type of a deployment receipt's
// attestation (docs/receipts.md §7): its predicate is the receipt itself.
const PredicateType = "https://qinglong.io/kubectl-ql3/deployment/v1"

// AttestationSuffix replaces FileSuffix to name a receipt's attestation:
// "000002-upgrade-3.1.0.intoto.json" beside "000002-upgrade-3.1.0.receipt.json".
const AttestationSuffix = ".intoto.json"

// InventorySubject names the subject whose sha256 is the receipt's
// inventory digest: the SHA-256 of "kubectl-ql3/inventory/v1", a zero byte
// and the canonical JSON of the receipt's inventory array.
const InventorySubject = "kubectl-ql3/inventory/v1"

// AttestationName is the file name of r's attestation.
func AttestationName(r *Receipt) string {
	return strings.TrimSuffix(FileName(r), FileSuffix) + AttestationSuffix
}

// attestationFor is the receipt file an attestation file name belongs to.
func attestationFor(path string) string {
	return strings.TrimSuffix(path, AttestationSuffix) + FileSuffix
}

// AttestationSubjects are the subjects of r's attestation, in this order:
// the receipt file (its name, the SHA-256 of its bytes data) and the
// inventory (InventorySubject, the hex of deployment.inventoryDigest).
func AttestationSubjects(r *Receipt, data []byte) []intoto.Subject {
	sum := sha256.Sum256(data)
	return []intoto.Subject{
		{Name: FileName(r), SHA256: hex.EncodeToString(sum[:])},
		{Name: InventorySubject, SHA256: strings.TrimPrefix(r.Deployment.InventoryDigest, canon.DigestPrefix)},
	}
}

// Attest returns the attestation file's bytes for the sealed receipt r: an
// in-toto Statement v1 of PredicateType whose predicate is the receipt's
// exact JSON, in a DSSE envelope signed by key under its KeyID (the one the
// receipt's .sig names).
func Attest(r *Receipt, key ed25519.PrivateKey) ([]byte, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fail.Errorf(fail.Invalid, "signing key is not an Ed25519 private key")
	}
	data, err := r.Bytes()
	if err != nil {
		return nil, err
	}
	id, err := KeyID(key.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, err
	}
	return intoto.Seal(PredicateType, data, AttestationSubjects(r, data), key, id)
}

// CheckAttestation verifies an attestation file's bytes env against the
// receipt r whose file bytes are data: strictly parsed (intoto.Parse),
// a well-formed key id; with keys, a signature by the trusted key it names
// (checked before the content is believed); predicate type PredicateType,
// predicate byte for byte data, subjects exactly AttestationSubjects. It
// returns the key id. Every failure is fail.Tamper.
func CheckAttestation(env []byte, r *Receipt, data []byte, keys TrustedKeys) (string, error) {
	p, err := intoto.Parse(env)
	if err != nil {
		return "", err
	}
	if !canon.IsDigest(p.KeyID) {
		return "", fail.Errorf(fail.Tamper, "attestation: keyid %q is not a key id", p.KeyID)
	}
	if len(keys) > 0 {
		if err := p.VerifySignature(keys); err != nil {
			return p.KeyID, fmt.Errorf("attestation: %w", err)
		}
	}
	if p.PredicateType != PredicateType {
		return p.KeyID, fail.Errorf(fail.Tamper, "attestation: predicateType %q is not %q", p.PredicateType, PredicateType)
	}
	if !bytes.Equal(p.Predicate, data) {
		return p.KeyID, fail.Errorf(fail.Tamper, "attestation: its predicate is not this receipt (%s)", r.SelfDigest)
	}
	if want := AttestationSubjects(r, data); !slices.Equal(p.Subjects, want) {
		return p.KeyID, fail.Errorf(fail.Tamper, "attestation: subjects %v are not %v", p.Subjects, want)
	}
	return p.KeyID, nil
}

// auditAttestation checks the attestation beside the receipt file at path,
// if there is one (docs/receipts.md §5.1 step 8): CheckAttestation against
// r's bytes, with the signature verified when keys are given. The error is
// for an attestation path that is not a regular file (unusable input).
func auditAttestation(row *ReceiptVerdict, path string, r *Receipt, keys TrustedKeys) error {
	attPath := strings.TrimSuffix(path, FileSuffix) + AttestationSuffix
	env, err := safefile.ReadRegular(attPath, intoto.MaxEnvelopeBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, safefile.ErrNotRegular):
		return fail.Errorf(fail.Invalid, "receipt audit: %w; an attestation must be a regular file", err)
	}
	row.Attestation = SignatureInvalid
	fails := func(err error) {
		row.Verdict = VerdictFail
		row.Reasons = append(row.Reasons, fmt.Sprintf("%s: %v", filepath.Base(attPath), err))
	}
	if err != nil {
		fails(err)
		return nil
	}
	data, err := r.Bytes()
	if err != nil {
		fails(err)
		return nil
	}
	if _, err := CheckAttestation(env, r, data, keys); err != nil {
		fails(err)
		return nil
	}
	row.Attestation = SignatureUnverified
	if len(keys) > 0 {
		row.Attestation = SignatureVerified
	}
	return nil
}
