package rollout

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/intoto"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// Result says what Publish wrote.
type Result struct {
	Path string `json:"path"`
	// AttestationPath is the attestation beside it; empty without a key.
	AttestationPath string `json:"attestationPath,omitempty"`
	// Replayed: the identical rollout receipt was already there.
	Replayed bool `json:"replayed,omitempty"`
}

// Publish seals r and writes it into dir (the fleet's receipts directory,
// which holds one directory per target) as FileName(r), never replacing a
// file; with a key, its attestation beside it (AttestationName): an
// in-toto Statement of PredicateType whose predicate is the rollout
// receipt and whose subjects are Subjects, in a DSSE envelope signed by
// the key under its receipts.KeyID — the deployment receipts' key and
// envelope writer.
func Publish(dir string, r *Receipt, key ed25519.PrivateKey) (Result, error) {
	data, err := r.Seal()
	if err != nil {
		return Result{}, err
	}
	var env []byte
	if key != nil {
		if len(key) != ed25519.PrivateKeySize {
			return Result{}, fail.Errorf(fail.Invalid, "signing key is not an Ed25519 private key")
		}
		id, err := receipts.KeyID(key.Public().(ed25519.PublicKey))
		if err != nil {
			return Result{}, err
		}
		if env, err = intoto.Seal(PredicateType, data, Subjects(r, data), key, id); err != nil {
			return Result{}, err
		}
	}
	res := Result{Path: filepath.Join(dir, FileName(r))}
	if res.Replayed, err = receipts.WriteNew(dir, FileName(r), data); err != nil {
		return res, err
	}
	if env == nil {
		return res, nil
	}
	res.AttestationPath = filepath.Join(dir, AttestationName(r))
	if _, err := receipts.WriteNew(dir, AttestationName(r), env); err != nil {
		return res, err
	}
	return res, nil
}

// Subjects are the subjects of r's attestation, in this order: the
// rollout receipt file (its name, the SHA-256 of its bytes data), then
// every committed target's receipt in the receipt's order (its path
// "<target>/<file>", the SHA-256 recorded for it).
func Subjects(r *Receipt, data []byte) []intoto.Subject {
	sum := sha256.Sum256(data)
	out := []intoto.Subject{{Name: FileName(r), SHA256: hex.EncodeToString(sum[:])}}
	for _, w := range r.Waves {
		for _, t := range w.Targets {
			if t.Receipt != nil {
				out = append(out, intoto.Subject{Name: t.Receipt.Path, SHA256: t.Receipt.SHA256})
			}
		}
	}
	return out
}
