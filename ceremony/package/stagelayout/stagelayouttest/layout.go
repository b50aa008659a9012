// Package stagelayouttest writes small, valid package stages as OCI image
// layouts, the way `oras push --oci-layout` and `oras attach --oci-layout`
// lay them out, so tests compute every digest instead of typing it.
// Keys come from fixed seeds: the same Spec writes the same bytes.
package stagelayouttest

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"

	"github.com/qinglong/kubectl-ql3/ceremony/package/intent"
	"github.com/qinglong/kubectl-ql3/ceremony/package/stagelayout"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// Key is the Ed25519 key derived from a 32-byte seed of the byte b.
func Key(b byte) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = b
	}
	return ed25519.NewKeyFromSeed(seed)
}

// PublicKeyPEM is k's public key as a trusted key file.
func PublicKeyPEM(k ed25519.PrivateKey) []byte {
	der, err := x509.MarshalPKIXPublicKey(k.Public())
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// Spec is what to stage. The zero value of each field has a default.
type Spec struct {
	Name   string // repository name; default "registry.example.com/qinglong/packages/demo"
	Config []byte // stage config (adapter evidence); default a small JSON
	Lock   []byte // package lock; default a small JSON
	Bundle []byte // bundle layer; default fixed bytes
	// Signer signs the stage receipt; default Key(1).
	Signer ed25519.PrivateKey
	// Statement, when set, edits the statement before it is signed.
	Statement func(*stagelayout.Statement)
	// Subject, when set, replaces the receipt's subject digest.
	Subject string
	// LockAnnotation, when set, replaces the receipt's lock annotation.
	LockAnnotation string
	// BreakSignature flips a bit of the signature after signing.
	BreakSignature bool
	// NoReceipt writes no stage receipt.
	NoReceipt bool
}

// Stage is a written layout and what it proves.
type Stage struct {
	Dir            string
	ManifestDigest string
	ReceiptDigest  string
	Evidence       stagelayout.Evidence
	// Blobs maps each part to its blob path: "config", "lock", "bundle",
	// "manifest", "receipt", "statement".
	Blobs map[string]string
}

// Intent is a generation-1 intent for the stage, on a fixed cluster.
func (s *Stage) Intent() intent.Intent {
	return intent.Intent{
		Schema:                intent.Schema,
		ClusterIdentity:       canon.ClusterIdentity("6a1f2e1c-3b5d-4c8e-9f70-2d4b6a8c0e12"),
		Namespace:             "qinglong",
		ProjectID:             "demo",
		PackageID:             "weather-tools",
		Generation:            1,
		LockDigest:            s.Evidence.LockDigest,
		StageReference:        s.Evidence.StageReference,
		StageReceiptDigest:    s.Evidence.StageReceiptDigest,
		AdapterEvidenceDigest: s.Evidence.AdapterEvidenceDigest,
		ContentDigest:         s.Evidence.ContentDigest,
	}
}

// Write stages spec into dir (created if needed) and returns it.
func Write(dir string, spec Spec) (*Stage, error) {
	if spec.Name == "" {
		spec.Name = "registry.example.com/qinglong/packages/demo"
	}
	if spec.Config == nil {
		spec.Config = []byte(`{"adapter":"oci-layout","stagedBy":"ocistagetest"}`)
	}
	if spec.Lock == nil {
		spec.Lock = []byte(`{"package":"weather-tools","version":"1.2.3"}`)
	}
	if spec.Bundle == nil {
		spec.Bundle = []byte("bundle bytes: not interpreted, only hashed")
	}
	if spec.Signer == nil {
		spec.Signer = Key(1)
	}
	s := &Stage{Dir: dir, Blobs: map[string]string{}}
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755); err != nil {
		return nil, err
	}
	put := func(part string, data []byte) (stagelayout.Descriptor, error) {
		sum := sha256.Sum256(data)
		d := "sha256:" + hex.EncodeToString(sum[:])
		p := filepath.Join(dir, "blobs", "sha256", hex.EncodeToString(sum[:]))
		if part != "" {
			s.Blobs[part] = p
		}
		return stagelayout.Descriptor{Digest: d, Size: int64(len(data))}, os.WriteFile(p, data, 0o644)
	}
	putJSON := func(part string, v any) (stagelayout.Descriptor, error) {
		data, err := json.Marshal(v)
		if err != nil {
			return stagelayout.Descriptor{}, err
		}
		return put(part, data)
	}

	config, err := put("config", spec.Config)
	if err != nil {
		return nil, err
	}
	config.MediaType = stagelayout.MediaTypeStageConfig
	lock, err := put("lock", spec.Lock)
	if err != nil {
		return nil, err
	}
	lock.MediaType = stagelayout.MediaTypeLock
	bundle, err := put("bundle", spec.Bundle)
	if err != nil {
		return nil, err
	}
	bundle.MediaType = stagelayout.MediaTypeBundle
	md, err := putJSON("manifest", stagelayout.Manifest{SchemaVersion: 2, MediaType: stagelayout.MediaTypeManifest, Config: config, Layers: []stagelayout.Descriptor{lock, bundle}})
	if err != nil {
		return nil, err
	}
	md.MediaType = stagelayout.MediaTypeManifest
	s.ManifestDigest = md.Digest
	ref := spec.Name + "@" + md.Digest
	s.Evidence = stagelayout.Evidence{LockDigest: lock.Digest, StageReference: ref, AdapterEvidenceDigest: config.Digest, ContentDigest: bundle.Digest}
	tagged := md
	tagged.Annotations = map[string]string{"org.opencontainers.image.ref.name": "v1"}
	index := stagelayout.Index{SchemaVersion: 2, MediaType: "application/vnd.oci.image.index.v1+json", Manifests: []stagelayout.Descriptor{tagged}}

	if !spec.NoReceipt {
		st := stagelayout.Statement{Schema: stagelayout.StatementSchema, StageReference: ref, LockDigest: lock.Digest, ContentDigest: bundle.Digest, AdapterEvidenceDigest: config.Digest}
		if spec.Statement != nil {
			spec.Statement(&st)
		}
		blob, err := st.Sign(spec.Signer)
		if err != nil {
			return nil, err
		}
		if spec.BreakSignature {
			var m map[string]string
			_ = json.Unmarshal(blob, &m)
			sig := []byte(m["signature"])
			if sig[0] = 'A'; m["signature"][0] == 'A' { // another base64 character: still 64 bytes
				sig[0] = 'B'
			}
			st.Signature = string(sig)
			if blob, err = canon.Canonical(st); err != nil {
				return nil, err
			}
		}
		sd, err := put("statement", blob)
		if err != nil {
			return nil, err
		}
		sd.MediaType = stagelayout.MediaTypeReceipt
		empty, err := put("", []byte("{}"))
		if err != nil {
			return nil, err
		}
		empty.MediaType = stagelayout.MediaTypeEmpty
		subject := md
		if spec.Subject != "" {
			subject.Digest = spec.Subject
		}
		ann := lock.Digest
		if spec.LockAnnotation != "" {
			ann = spec.LockAnnotation
		}
		rd, err := putJSON("receipt", stagelayout.Manifest{
			SchemaVersion: 2, MediaType: stagelayout.MediaTypeManifest, ArtifactType: stagelayout.ArtifactTypeReceipt,
			Config: empty, Layers: []stagelayout.Descriptor{sd}, Subject: &subject,
			Annotations: map[string]string{stagelayout.AnnotationLockDigest: ann},
		})
		if err != nil {
			return nil, err
		}
		rd.MediaType = stagelayout.MediaTypeManifest
		rd.ArtifactType = stagelayout.ArtifactTypeReceipt
		s.ReceiptDigest = rd.Digest
		s.Evidence.StageReceiptDigest = rd.Digest
		index.Manifests = append(index.Manifests, rd)
	}
	if err := os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(index, "", "  ")
	if err != nil {
		return nil, err
	}
	return s, os.WriteFile(filepath.Join(dir, "index.json"), data, 0o644)
}
