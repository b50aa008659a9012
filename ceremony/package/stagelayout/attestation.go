package stagelayout

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	specs "github.com/opencontainers/image-spec/specs-go"

	"github.com/qinglong/kubectl-ql3/internal/intoto"
)

// The stage attestation (docs/package-pointer.md, "The stage
// attestation"): the signed statement again, as an in-toto Statement v1 in
// a DSSE envelope sealed by internal/intoto, so that supply-chain tools
// (cosign verify-blob-attestation) verify a stage with the stage key.
const (
	// PredicateType is the stage attestation's predicate type: its
	// predicate is the signed stage statement itself.
	PredicateType = "https://qinglong.io/kubectl-ql3/package-stage/v1"
	// ArtifactTypeAttestation is the stage attestation referrer's
	// artifactType.
	ArtifactTypeAttestation = "application/vnd.qinglong.plugin-package.stage-attestation.v1"
	// MediaTypeEnvelope is its one layer: the DSSE envelope.
	MediaTypeEnvelope = "application/vnd.dsse.envelope.v1+json"
)

// The names of the stage attestation's subjects, in this order; each
// digest is the OCI digest of that blob of the layout.
const (
	SubjectManifest = "package-manifest"
	SubjectLock     = "package-lock"
	SubjectBundle   = "package-bundle"
	SubjectEvidence = "stage-evidence"
)

// keyID is a public key's id: "sha256:" and the hex SHA-256 of its PKIX
// DER, as receipt keys are named (docs/receipts.md §3).
func keyID(pub ed25519.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// attestationSubjects are the subjects of the attestation of the stage of
// manifest digest md with evidence ev.
func attestationSubjects(md string, ev Evidence) []intoto.Subject {
	hexOf := func(d string) string { return strings.TrimPrefix(d, "sha256:") }
	return []intoto.Subject{
		{Name: SubjectManifest, SHA256: hexOf(md)},
		{Name: SubjectLock, SHA256: hexOf(ev.LockDigest)},
		{Name: SubjectBundle, SHA256: hexOf(ev.ContentDigest)},
		{Name: SubjectEvidence, SHA256: hexOf(ev.AdapterEvidenceDigest)},
	}
}

// AttachAttestation writes the stage attestation of s into dir: the DSSE
// envelope of an in-toto Statement of PredicateType whose predicate is
// signed (the statement blob AttachReceipt wrote) and whose subjects are
// the package manifest, lock, bundle and evidence blobs, sealed with key
// by intoto.Seal; then a referrer manifest (empty config, the envelope as
// its one layer, subject s's manifest, the lock digest annotation) and its
// index.json entry.
func AttachAttestation(dir string, s *Staged, signed []byte, key ed25519.PrivateKey) (Descriptor, error) {
	id, err := keyID(key.Public().(ed25519.PublicKey))
	if err != nil {
		return Descriptor{}, err
	}
	env, err := intoto.Seal(PredicateType, signed, attestationSubjects(string(s.Manifest.Digest), s.Evidence), key, id)
	if err != nil {
		return Descriptor{}, err
	}
	w, err := openWriter(dir)
	if err != nil {
		return Descriptor{}, err
	}
	defer w.root.Close()
	layer, err := w.blob(MediaTypeEnvelope, env)
	if err != nil {
		return Descriptor{}, err
	}
	empty, err := w.blob(MediaTypeEmpty, []byte("{}"))
	if err != nil {
		return Descriptor{}, err
	}
	subject := Descriptor{MediaType: s.Manifest.MediaType, Digest: s.Manifest.Digest, Size: s.Manifest.Size}
	ad, err := w.json(MediaTypeManifest, Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: MediaTypeManifest, ArtifactType: ArtifactTypeAttestation,
		Config: empty, Layers: []Descriptor{layer}, Subject: &subject,
		Annotations: map[string]string{AnnotationLockDigest: s.Evidence.LockDigest},
	})
	if err != nil {
		return Descriptor{}, err
	}
	ad.ArtifactType = ArtifactTypeAttestation
	return ad, w.list(ad)
}

// attestations checks every stage attestation in the layout whose subject
// is the package manifest md and whose lock annotation is ev's lock: each
// must be shaped as AttachAttestation writes it, its envelope strict and
// signed by a trusted key (intoto), of PredicateType, its predicate a
// stage statement describing exactly this layout whose own signature
// verifies, and its subjects attestationSubjects. None is fine (stages
// attached before attestations existed, stage tools that write none); a
// failing one is fail.Conflict.
func (v *Verifier) attestations(l *layout, md Descriptor, ev Evidence) error {
	ix, err := l.index()
	if err != nil {
		return err
	}
	for _, d := range ix.Manifests {
		if d.MediaType != MediaTypeManifest || d.ArtifactType != ArtifactTypeAttestation {
			continue
		}
		data, err := l.blob(d, MaxManifestBytes)
		if err != nil {
			return err
		}
		var m Manifest
		if json.Unmarshal(data, &m) != nil || m.Subject == nil || m.Subject.Digest != md.Digest || m.Annotations[AnnotationLockDigest] != ev.LockDigest {
			continue
		}
		if m.SchemaVersion != 2 || m.MediaType != MediaTypeManifest || m.ArtifactType != ArtifactTypeAttestation || m.Config.Digest != EmptyDigest ||
			len(m.Layers) != 1 || m.Layers[0].MediaType != MediaTypeEnvelope || m.Subject.Size != md.Size {
			return conflictf("stage attestation %s: not shaped as an attestation (empty config, one %s layer, subject a %s of %d bytes)", d.Digest, MediaTypeEnvelope, MediaTypeManifest, md.Size)
		}
		env, err := l.blob(m.Layers[0], intoto.MaxEnvelopeBytes)
		if err != nil {
			return err
		}
		if err := v.checkAttestation(env, string(md.Digest), ev); err != nil {
			return conflictf("stage attestation %s: %v", d.Digest, err)
		}
	}
	return nil
}

// checkAttestation verifies one envelope against the layout read.
func (v *Verifier) checkAttestation(env []byte, md string, ev Evidence) error {
	keys := map[string]ed25519.PublicKey{}
	for _, k := range v.TrustedKeys {
		id, err := keyID(k)
		if err != nil {
			return err
		}
		keys[id] = k
	}
	st, err := intoto.Verify(env, keys)
	if err != nil {
		return err
	}
	if st.PredicateType != PredicateType {
		return fmt.Errorf("predicateType %q is not %q", st.PredicateType, PredicateType)
	}
	s, err := ParseStatement(st.Predicate)
	if err != nil {
		return err
	}
	if c, err := s.canonical(); err != nil || !bytes.Equal(c, st.Predicate) {
		return fmt.Errorf("its predicate is not a stage statement's canonical bytes")
	}
	if _, err := s.VerifySignature(v.TrustedKeys); err != nil {
		return err
	}
	if s.StageReference != ev.StageReference || s.LockDigest != ev.LockDigest || s.ContentDigest != ev.ContentDigest || s.AdapterEvidenceDigest != ev.AdapterEvidenceDigest {
		return fmt.Errorf("its predicate does not describe manifest %s", md)
	}
	if want := attestationSubjects(md, ev); !slices.Equal(st.Subjects, want) {
		return fmt.Errorf("subjects %v are not %v", st.Subjects, want)
	}
	return nil
}
