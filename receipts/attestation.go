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

// The names of the subjects derived from digests (docs/receipts.md §7.2):
// each subject's sha256 is the hex of a digest the tool defines, so its
// file is that digest's input, "kubectl-ql3/<domain>/v1", a zero byte and
// canonical JSON (canon.DigestInput), which `kubectl ql3 render DIR
// --subject NAME` writes byte for byte.
const (
	// InventorySubject: the receipt's inventory digest.
	InventorySubject = "kubectl-ql3/inventory/v1"
	// LockSubject: the receipt's deployment.lockDigest, the digest of the
	// lock's canonical JSON.
	LockSubject = "kubectl-ql3/lock/v1"
	// RenderSubject: the render digest of the release applied (the
	// lock's render.digest): every object in inventory order.
	RenderSubject = "kubectl-ql3/render/v1"
	// ObjectSubjectPrefix starts the name of one applied object's
	// subject: ObjectSubject.
	ObjectSubjectPrefix = "kubectl-ql3/object/v1/"
)

// AttestationName is the file name of r's attestation.
func AttestationName(r *Receipt) string {
	return strings.TrimSuffix(FileName(r), FileSuffix) + AttestationSuffix
}

// attestationFor is the receipt file an attestation file name belongs to.
func attestationFor(path string) string {
	return strings.TrimSuffix(path, AttestationSuffix) + FileSuffix
}

// fixedSubjects is the number of subjects before the objects': the
// receipt file, inventory, lock and render.
const fixedSubjects = 4

// Rendered is the release a receipt's deployment applied, as its
// attestation states it: what the receipt alone does not hold.
type Rendered struct {
	// RenderDigest is the release's render digest (docs/digests.md).
	RenderDigest string `json:"renderDigest"`
	// Objects are the applied objects in inventory order, each with its
	// digest: the "object"-domain digest of its canonical JSON as the
	// render digest covers it.
	Objects []RenderedObject `json:"-"`
}

// RenderedObject is one applied object and its digest.
type RenderedObject struct {
	ID     canon.Identity
	Digest string
}

// ObjectSubject is the subject name of the object id: ObjectSubjectPrefix,
// then its key (§2.5) as group "/" kind "/" namespace "/" name, the core
// group and a cluster-scoped object's namespace empty:
// "kubectl-ql3/object/v1/apps/Deployment/qinglong-prod/control",
// "kubectl-ql3/object/v1//Namespace//qinglong-prod".
func ObjectSubject(id canon.Identity) string {
	k := id.Key()
	return ObjectSubjectPrefix + k.Group + "/" + k.Kind + "/" + k.Namespace + "/" + k.Name
}

// hexOf is a well-formed digest's hex.
func hexOf(d string) string { return strings.TrimPrefix(d, canon.DigestPrefix) }

// AttestationSubjects are the subjects of r's attestation, in this order:
// the receipt file (its name, the SHA-256 of its bytes data), the
// inventory, the lock, the render, and one per applied object in
// inventory order. rel must be the release r's deployment applied: its
// objects exactly r's inventory.
func AttestationSubjects(r *Receipt, data []byte, rel *Rendered) ([]intoto.Subject, error) {
	if rel == nil {
		return nil, fail.Errorf(fail.Invalid, "attestation of %s: the rendered release it applied is required", FileName(r))
	}
	if !canon.IsDigest(rel.RenderDigest) {
		return nil, fail.Errorf(fail.Invalid, "attestation of %s: render digest %q is not a digest", FileName(r), rel.RenderDigest)
	}
	if len(rel.Objects) != len(r.Inventory) {
		return nil, fail.Errorf(fail.Invalid, "attestation of %s: the release has %d objects, the receipt's inventory %d", FileName(r), len(rel.Objects), len(r.Inventory))
	}
	sum := sha256.Sum256(data)
	subs := []intoto.Subject{
		{Name: FileName(r), SHA256: hex.EncodeToString(sum[:])},
		{Name: InventorySubject, SHA256: hexOf(r.Deployment.InventoryDigest)},
		{Name: LockSubject, SHA256: hexOf(r.Deployment.LockDigest)},
		{Name: RenderSubject, SHA256: hexOf(rel.RenderDigest)},
	}
	for i, o := range rel.Objects {
		if o.ID != r.Inventory[i] || !canon.IsDigest(o.Digest) {
			return nil, fail.Errorf(fail.Invalid, "attestation of %s: release object %d (%s, digest %q) is not inventory entry %s with a digest", FileName(r), i, o.ID, o.Digest, r.Inventory[i])
		}
		if k := o.ID.Key(); strings.Contains(k.Group+k.Kind+k.Namespace+k.Name, "/") {
			return nil, fail.Errorf(fail.Invalid, "attestation of %s: object %s has a \"/\" in its key; no subject name can hold it", FileName(r), o.ID)
		}
		subs = append(subs, intoto.Subject{Name: ObjectSubject(o.ID), SHA256: hexOf(o.Digest)})
	}
	return subs, nil
}

// Attest returns the attestation file's bytes for the sealed receipt r of
// a deployment that applied rel: an in-toto Statement v1 of PredicateType
// whose predicate is the receipt's exact JSON and whose subjects are
// AttestationSubjects, in a DSSE envelope signed by key under its KeyID
// (the one the receipt's .sig names).
func Attest(r *Receipt, rel *Rendered, key ed25519.PrivateKey) ([]byte, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fail.Errorf(fail.Invalid, "signing key is not an Ed25519 private key")
	}
	data, err := r.Bytes()
	if err != nil {
		return nil, err
	}
	subs, err := AttestationSubjects(r, data, rel)
	if err != nil {
		return nil, err
	}
	id, err := KeyID(key.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, err
	}
	return intoto.Seal(PredicateType, data, subs, key, id)
}

// CheckAttestation verifies an attestation file's bytes env against the
// receipt r whose file bytes are data: strictly parsed (intoto.Parse),
// a well-formed key id; with keys, a signature by the trusted key it names
// (checked before the content is believed); predicate type PredicateType,
// predicate byte for byte data; the subjects derived from the receipt
// (file, inventory, lock) exactly, then the render subject and one object
// subject per inventory entry, named as AttestationSubjects names them.
// It returns the key id and the release the subjects state, whose digests
// only a release can confirm (checkRelease). Every failure is fail.Tamper.
func CheckAttestation(env []byte, r *Receipt, data []byte, keys TrustedKeys) (string, *Rendered, error) {
	p, err := intoto.Parse(env)
	if err != nil {
		return "", nil, err
	}
	if !canon.IsDigest(p.KeyID) {
		return "", nil, fail.Errorf(fail.Tamper, "attestation: keyid %q is not a key id", p.KeyID)
	}
	if len(keys) > 0 {
		if err := p.VerifySignature(keys); err != nil {
			return p.KeyID, nil, fmt.Errorf("attestation: %w", err)
		}
	}
	if p.PredicateType != PredicateType {
		return p.KeyID, nil, fail.Errorf(fail.Tamper, "attestation: predicateType %q is not %q", p.PredicateType, PredicateType)
	}
	if !bytes.Equal(p.Predicate, data) {
		return p.KeyID, nil, fail.Errorf(fail.Tamper, "attestation: its predicate is not this receipt (%s)", r.SelfDigest)
	}
	rel, err := statedRelease(p.Subjects, r)
	if err != nil {
		return p.KeyID, nil, err
	}
	want, err := AttestationSubjects(r, data, rel)
	if err != nil {
		return p.KeyID, nil, fail.Errorf(fail.Tamper, "attestation: %v", err)
	}
	for i := range want {
		if p.Subjects[i] != want[i] {
			return p.KeyID, nil, fail.Errorf(fail.Tamper, "attestation: subject %d is %v, want %v", i+1, p.Subjects[i], want[i])
		}
	}
	return p.KeyID, rel, nil
}

// statedRelease reads the render and object subjects back into the
// release they state, requiring their count and names.
func statedRelease(subs []intoto.Subject, r *Receipt) (*Rendered, error) {
	if len(subs) != fixedSubjects+len(r.Inventory) {
		return nil, fail.Errorf(fail.Tamper, "attestation: %d subjects, want %d (receipt file, inventory, lock, render and one per inventory entry)", len(subs), fixedSubjects+len(r.Inventory))
	}
	if subs[fixedSubjects-1].Name != RenderSubject {
		return nil, fail.Errorf(fail.Tamper, "attestation: subject %d is %q, want %q", fixedSubjects, subs[fixedSubjects-1].Name, RenderSubject)
	}
	rel := &Rendered{RenderDigest: canon.DigestPrefix + subs[fixedSubjects-1].SHA256, Objects: make([]RenderedObject, len(r.Inventory))}
	for i, id := range r.Inventory {
		s := subs[fixedSubjects+i]
		if s.Name != ObjectSubject(id) {
			return nil, fail.Errorf(fail.Tamper, "attestation: subject %d is %q, want %q (inventory entry %d)", fixedSubjects+i+1, s.Name, ObjectSubject(id), i+1)
		}
		rel.Objects[i] = RenderedObject{ID: id, Digest: canon.DigestPrefix + s.SHA256}
	}
	return rel, nil
}

// statedReleaseRule compares the release rendered with the one the newest
// receipt's attestation states (docs/receipts.md §5.3): the render digest
// and each object's digest, by subject.
func statedReleaseRule(rel, stated *Rendered, gen int64) []string {
	var out []string
	if rel.RenderDigest != stated.RenderDigest {
		out = append(out, fmt.Sprintf("release render digest %q is not the render subject %q of generation %d's attestation", rel.RenderDigest, stated.RenderDigest, gen))
	}
	if len(rel.Objects) != len(stated.Objects) {
		return append(out, fmt.Sprintf("the release has %d objects, generation %d's attestation %d object subjects", len(rel.Objects), gen, len(stated.Objects)))
	}
	for i, o := range stated.Objects {
		if rel.Objects[i] != o {
			out = append(out, fmt.Sprintf("release object %s has digest %q, not %q as subject %q of generation %d's attestation states", rel.Objects[i].ID, rel.Objects[i].Digest, o.Digest, ObjectSubject(o.ID), gen))
		}
	}
	return out
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
	id, attested, err := CheckAttestation(env, r, data, keys)
	if err != nil {
		fails(err)
		return nil
	}
	if row.SignatureKey != "" && id != row.SignatureKey {
		fails(fmt.Errorf("signed by key %q, but the receipt's signature by key %q; both are made by the one key that signs the receipt", id, row.SignatureKey))
		return nil
	}
	row.attested = attested
	row.Attestation = SignatureUnverified
	if len(keys) > 0 {
		row.Attestation = SignatureVerified
	}
	return nil
}
