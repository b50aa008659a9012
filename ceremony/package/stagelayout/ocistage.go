// Package stagelayout is the stage evidence port over an OCI image layout
// directory: Verify(intent) re-reads a package stage from the layout's
// blobs, follows the signed stage receipt that refers to it, and returns
// the five evidence fields an activation intent binds, or says why not
// (docs/package-pointer.md, "Stage evidence in an OCI layout").
//
// It reads only the directory it is given: no network, no cache, no
// registry client, the standard library and the project's leaf formats.
//
// Outcomes: evidence (nil error); fail.Unavailable when a file of the
// layout, or a blob it names, cannot be read intact (absent, unreadable,
// not a regular file, wrong size or hash, no stage receipt yet) —
// rerunning is safe once the layout is
// repaired or complete; fail.Conflict when every blob was read intact and
// what they say does not prove the intent (a different digest, a receipt
// not signed by a trusted key, a reference outside the allowlist, a
// manifest that is not a package stage); fail.Invalid for bad arguments,
// a layout directory that is missing, not a directory or holds no
// oci-layout file included.
package stagelayout

import (
	"crypto/ed25519"
	"encoding/json"
	"slices"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/kubectl-ql3/ceremony/package/intent"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/strictjson"
)

// Media and artifact types of a package stage (docs/package-pointer.md).
const (
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeEmpty    = "application/vnd.oci.empty.v1+json"
	// MediaTypeStageConfig is the package manifest's config blob: the
	// stage adapter's evidence.
	MediaTypeStageConfig = "application/vnd.qinglong.plugin-package.stage.v1+json"
	// MediaTypeLock is the layer holding the package lock.
	MediaTypeLock = "application/vnd.qinglong.plugin-package.lock.v1+json"
	// MediaTypeBundle is the layer holding the package bundle.
	MediaTypeBundle = "application/vnd.qinglong.plugin-package.bundle.v1.tar+gzip"
	// ArtifactTypeReceipt is the stage receipt referrer's artifactType.
	ArtifactTypeReceipt = "application/vnd.qinglong.plugin-package.stage-receipt.v1"
	// MediaTypeReceipt is the stage receipt referrer's one layer: the
	// signed Statement.
	MediaTypeReceipt = "application/vnd.qinglong.plugin-package.stage-receipt.v1+json"
	// AnnotationLockDigest on a stage receipt referrer names the lock it
	// is the receipt for.
	AnnotationLockDigest = "io.qinglong.plugin-package.lock.digest"
	// EmptyDigest is the digest of the two bytes "{}", the empty config.
	EmptyDigest = "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
)

// Evidence is what a stage proves: the five fields an activation intent
// binds, each read from the layout.
type Evidence = intent.StageEvidence

// The OCI layout verifier is a stage evidence port.
var _ intent.StageVerifier = (*Verifier)(nil)

// Verifier verifies intents against one OCI image layout.
type Verifier struct {
	// Layout is the OCI image layout directory.
	Layout string
	// TrustedKeys are the Ed25519 keys a stage receipt may be signed by.
	TrustedKeys []ed25519.PublicKey
	// Allow lists the stage references a verified intent may name: an
	// entry NAME admits every NAME@sha256:…, an entry NAME@sha256:… only
	// itself.
	Allow []string
}

// Validate checks the verifier's own configuration (fail.Invalid).
func (v *Verifier) Validate() error {
	if v.Layout == "" {
		return fail.Errorf(fail.Invalid, "stage evidence: no OCI layout directory given (--layout)")
	}
	if len(v.TrustedKeys) == 0 {
		return fail.Errorf(fail.Invalid, "stage evidence: no trusted key given (--trusted-key); an unsigned stage proves nothing")
	}
	for i, k := range v.TrustedKeys {
		if len(k) != ed25519.PublicKeySize {
			return fail.Errorf(fail.Invalid, "stage evidence: trusted key %d is not an Ed25519 public key", i+1)
		}
	}
	if len(v.Allow) == 0 {
		return fail.Errorf(fail.Invalid, "stage evidence: the allowlist is empty (--allow-ref NAME or NAME@sha256:…)")
	}
	for _, a := range v.Allow {
		if intent.CheckName("allow-ref", a) != nil && intent.CheckReference("allow-ref", a) != nil {
			return fail.Errorf(fail.Invalid, "stage evidence: --allow-ref %q is neither a repository name nor NAME@sha256:<64 hex>", strictjson.Clip(a))
		}
	}
	return nil
}

// Allowed reports whether the allowlist admits ref.
func (v *Verifier) Allowed(ref string) bool {
	name, _, err := intent.SplitReference(ref)
	return err == nil && (slices.Contains(v.Allow, ref) || slices.Contains(v.Allow, name))
}

// Verify reads the stage in's stageReference names from the layout and
// returns its evidence. When the evidence was read and differs from in,
// it is returned with a fail.Conflict naming every differing field.
func (v *Verifier) Verify(in intent.Intent) (Evidence, error) {
	if err := v.Validate(); err != nil {
		return Evidence{}, err
	}
	in, err := intent.Normalize(in)
	if err != nil {
		return Evidence{}, err
	}
	ev, err := v.Read(in.StageReference, in.StageReceiptDigest)
	if err != nil {
		return ev, err
	}
	return ev, Compare(in, ev)
}

// Read reads the evidence of the stage ref, which the allowlist must
// admit, from the layout, without an intent to compare it with. Of several stage receipts for the manifest
// and its lock, the one whose digest is receiptHint is taken; with one,
// receiptHint may be "".
func (v *Verifier) Read(ref, receiptHint string) (Evidence, error) {
	if err := v.Validate(); err != nil {
		return Evidence{}, err
	}
	_, manifestDigest, err := intent.SplitReference(ref)
	if err != nil {
		return Evidence{}, err
	}
	if !v.Allowed(ref) {
		return Evidence{}, conflictf("stage reference %s is not in the allowlist (--allow-ref); this verifier does not vouch for that stage", ref)
	}
	l, err := openLayout(v.Layout)
	if err != nil {
		return Evidence{}, err
	}
	defer l.Close()

	// 1. The package manifest, by the digest the reference pins.
	size, err := l.blobSize(digest.Digest(manifestDigest))
	if err != nil {
		return Evidence{}, err
	}
	md := Descriptor{MediaType: MediaTypeManifest, Digest: digest.Digest(manifestDigest), Size: size}
	data, err := l.blob(md, MaxManifestBytes)
	if err != nil {
		return Evidence{}, err
	}
	m, err := parseManifest(manifestDigest, data)
	if err != nil {
		return Evidence{}, err
	}
	config, lock, bundle, err := packageParts(manifestDigest, m)
	if err != nil {
		return Evidence{}, err
	}
	// 2. Its config, lock and bundle, re-hashed from the blobs.
	for _, d := range []Descriptor{config, lock, bundle} {
		if _, err := l.blob(d, -1); err != nil {
			return Evidence{}, err
		}
	}
	ev := Evidence{
		LockDigest:            string(lock.Digest),
		StageReference:        ref,
		AdapterEvidenceDigest: string(config.Digest),
		ContentDigest:         string(bundle.Digest),
	}
	// 3. The stage receipt: a referrer whose subject is the manifest.
	rd, st, err := v.receipt(l, md, string(lock.Digest), receiptHint)
	if err != nil {
		return Evidence{}, err
	}
	ev.StageReceiptDigest = rd
	// 4. The statement must say what the layout says.
	var diff []string
	for _, f := range []struct{ name, got, want string }{
		{"stageReference", st.StageReference, ev.StageReference},
		{"lockDigest", st.LockDigest, ev.LockDigest},
		{"contentDigest", st.ContentDigest, ev.ContentDigest},
		{"adapterEvidenceDigest", st.AdapterEvidenceDigest, ev.AdapterEvidenceDigest},
	} {
		if f.got != f.want {
			diff = append(diff, f.name+" "+f.got+" (layout: "+f.want+")")
		}
	}
	if len(diff) > 0 {
		return Evidence{}, conflictf("stage receipt %s does not describe manifest %s: %s", rd, manifestDigest, strings.Join(diff, "; "))
	}
	// 5. Every stage attestation of the manifest verifies.
	if err := v.attestations(l, md, ev); err != nil {
		return Evidence{}, err
	}
	return ev, nil
}

// Compare is intent.CompareEvidence: any difference is fail.Conflict.
func Compare(in intent.Intent, ev Evidence) error { return intent.CompareEvidence(in, ev) }

// parseManifest reads an intact manifest blob; what it says is checked by
// the caller.
func parseManifest(digest string, data []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, conflictf("manifest %s is not an OCI image manifest: %v", digest, err)
	}
	if m.SchemaVersion != 2 || m.MediaType != MediaTypeManifest {
		return nil, conflictf("manifest %s: schemaVersion %d, mediaType %q; want 2 and %s", digest, m.SchemaVersion, strictjson.Clip(m.MediaType), MediaTypeManifest)
	}
	return &m, nil
}

// packageParts checks that m is a package stage: config of the stage
// config type, exactly one lock layer and one bundle layer, nothing else.
func packageParts(digest string, m *Manifest) (config, lock, bundle Descriptor, err error) {
	if m.Config.MediaType != MediaTypeStageConfig {
		return config, lock, bundle, conflictf("manifest %s: config mediaType %q, want %s: not a package stage", digest, strictjson.Clip(m.Config.MediaType), MediaTypeStageConfig)
	}
	var locks, bundles []Descriptor
	for _, d := range m.Layers {
		switch d.MediaType {
		case MediaTypeLock:
			locks = append(locks, d)
		case MediaTypeBundle:
			bundles = append(bundles, d)
		default:
			return config, lock, bundle, conflictf("manifest %s: layer of mediaType %q; a package stage has one %s and one %s layer only", digest, strictjson.Clip(d.MediaType), MediaTypeLock, MediaTypeBundle)
		}
	}
	if len(locks) != 1 || len(bundles) != 1 {
		return config, lock, bundle, conflictf("manifest %s: %d lock and %d bundle layers; a package stage has exactly one of each", digest, len(locks), len(bundles))
	}
	return m.Config, locks[0], bundles[0], nil
}

// receipt finds and verifies the stage receipt of the manifest md: an
// index.json manifest whose subject is md, of ArtifactTypeReceipt,
// annotated with the manifest's lock digest, signed by a trusted key.
func (v *Verifier) receipt(l *layout, md Descriptor, lockDigest, hint string) (string, Statement, error) {
	ix, err := l.index()
	if err != nil {
		return "", Statement{}, err
	}
	type candidate struct {
		d Descriptor
		m *Manifest
	}
	var found []candidate
	var wrongLock int
	for _, d := range ix.Manifests {
		// Descriptors of another artifact type are not read at all.
		if d.MediaType != MediaTypeManifest || d.ArtifactType != "" && d.ArtifactType != ArtifactTypeReceipt {
			continue
		}
		data, err := l.blob(d, MaxManifestBytes)
		if err != nil {
			return "", Statement{}, err
		}
		var m Manifest
		if json.Unmarshal(data, &m) != nil || m.Subject == nil || m.Subject.Digest != md.Digest || m.ArtifactType != ArtifactTypeReceipt {
			continue
		}
		if m.Annotations[AnnotationLockDigest] != lockDigest {
			wrongLock++
			continue
		}
		found = append(found, candidate{d, &m})
	}
	if len(found) == 0 {
		return "", Statement{}, unavailablef("%s/index.json lists no stage receipt (artifactType %s, subject %s, annotation %s=%s)%s; attach the signed receipt to the layout",
			l.dir, ArtifactTypeReceipt, md.Digest, AnnotationLockDigest, lockDigest, map[bool]string{true: " (there are receipts for other locks)", false: ""}[wrongLock > 0])
	}
	pick := -1
	for i, c := range found {
		if string(c.d.Digest) == hint {
			pick = i
		}
	}
	if pick < 0 {
		if len(found) > 1 {
			return "", Statement{}, conflictf("manifest %s has %d stage receipts for lock %s and none is the one named (%q)", md.Digest, len(found), lockDigest, hint)
		}
		pick = 0
	}
	c := found[pick]
	m := c.m
	if m.SchemaVersion != 2 || m.MediaType != MediaTypeManifest || m.Config.MediaType != MediaTypeEmpty || m.Config.Digest != EmptyDigest || m.Config.Size != 2 ||
		len(m.Layers) != 1 || m.Layers[0].MediaType != MediaTypeReceipt || m.Subject.MediaType != MediaTypeManifest || m.Subject.Size != md.Size {
		return "", Statement{}, conflictf("stage receipt %s: not shaped as a receipt (empty config, one %s layer, subject a %s of %d bytes)", c.d.Digest, MediaTypeReceipt, MediaTypeManifest, md.Size)
	}
	data, err := l.blob(m.Layers[0], MaxStatementBytes)
	if err != nil {
		return "", Statement{}, err
	}
	st, err := ParseStatement(data)
	if err != nil {
		return "", Statement{}, err
	}
	if _, err := st.VerifySignature(v.TrustedKeys); err != nil {
		return "", Statement{}, err
	}
	return string(c.d.Digest), st, nil
}

// FindStage finds, in the layout's index.json, the package manifest whose
// lock layer is lockDigest, and returns the manifest's digest: the
// stageReference of `kubectl ql3 package intent` is NAME@ that digest.
// Entries of another media type or with an artifactType are not read;
// each manifest read is checked by size and digest. No such manifest is
// fail.Unavailable (the stage is not in this layout yet); several
// different ones are fail.Conflict.
func (v *Verifier) FindStage(lockDigest string) (string, error) {
	if err := v.Validate(); err != nil {
		return "", err
	}
	l, err := openLayout(v.Layout)
	if err != nil {
		return "", err
	}
	defer l.Close()
	ix, err := l.index()
	if err != nil {
		return "", err
	}
	var found []string
	for _, d := range ix.Manifests {
		if d.MediaType != MediaTypeManifest || d.ArtifactType != "" || slices.Contains(found, string(d.Digest)) {
			continue
		}
		data, err := l.blob(d, MaxManifestBytes)
		if err != nil {
			return "", err
		}
		m, err := parseManifest(string(d.Digest), data)
		if err != nil {
			continue
		}
		if _, lock, _, err := packageParts(string(d.Digest), m); err == nil && string(lock.Digest) == lockDigest {
			found = append(found, string(d.Digest))
		}
	}
	switch len(found) {
	case 0:
		return "", unavailablef("%s/index.json lists no package manifest whose lock layer is %s: the package is not staged in this layout", l.dir, lockDigest)
	case 1:
		return found[0], nil
	}
	return "", conflictf("%s/index.json lists %d package manifests for lock %s (%s): name the stage with --stage-ref", l.dir, len(found), lockDigest, strings.Join(found, ", "))
}
