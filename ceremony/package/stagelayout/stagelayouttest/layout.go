// Package stagelayouttest writes small, valid package stages as OCI image
// layouts, the way `oras push --oci-layout` and `oras attach --oci-layout`
// lay them out, so tests compute every digest instead of typing it.
// Keys come from fixed seeds: the same Spec writes the same bytes.
package stagelayouttest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"

	"github.com/opencontainers/go-digest"

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
	// Attester, when set, attests the stage after its receipt
	// (stagelayout.AttachAttestation), as `kubectl ql3 package stage`
	// does with its key.
	Attester ed25519.PrivateKey
	// AttestStatement, when set, edits the statement the attestation
	// carries (signed again by Signer) and leaves the receipt's alone.
	AttestStatement func(*stagelayout.Statement)
}

// Stage is a written layout and what it proves.
type Stage struct {
	Dir            string
	ManifestDigest string
	ReceiptDigest  string
	Evidence       stagelayout.Evidence
	// Blobs maps each part to its blob path: "config", "lock", "bundle",
	// "manifest", "receipt", "statement", and "attestation" (the envelope)
	// when attested.
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

// Write stages spec into dir (created if needed) with the producer
// stagelayout.WritePackage and stagelayout.AttachReceipt, as `kubectl ql3
// package stage` does, and returns it. The manifest is tagged "v1".
func Write(dir string, spec Spec) (*Stage, error) {
	spec = spec.withDefaults()
	st, err := stagelayout.WritePackage(dir, stagelayout.Package{Name: spec.Name, Tag: "v1", Evidence: spec.Config, Lock: spec.Lock, Bundle: bytes.NewReader(spec.Bundle)})
	if err != nil {
		return nil, err
	}
	s := &Stage{Dir: dir, ManifestDigest: string(st.Manifest.Digest), Evidence: st.Evidence, Blobs: map[string]string{}}
	for part, d := range map[string]stagelayout.Descriptor{"config": st.Config, "lock": st.Lock, "bundle": st.Bundle, "manifest": st.Manifest} {
		s.Blobs[part] = blobFile(dir, d)
	}
	if spec.NoReceipt {
		return s, nil
	}
	statement := st.Statement()
	if spec.Statement != nil {
		spec.Statement(&statement)
	}
	blob, err := statement.Sign(spec.Signer)
	if err != nil {
		return nil, err
	}
	if spec.BreakSignature {
		if blob, err = breakSignature(statement, blob); err != nil {
			return nil, err
		}
	}
	subject, ann := st.Manifest, st.Evidence.LockDigest
	if spec.Subject != "" {
		subject.Digest = digest.Digest(spec.Subject)
	}
	if spec.LockAnnotation != "" {
		ann = spec.LockAnnotation
	}
	rd, err := stagelayout.AttachReceipt(dir, st, blob, subject, ann)
	if err != nil {
		return nil, err
	}
	s.ReceiptDigest = string(rd.Digest)
	s.Evidence.StageReceiptDigest = string(rd.Digest)
	s.Blobs["receipt"] = blobFile(dir, rd)
	s.Blobs["statement"] = filepath.Join(dir, "blobs", "sha256", digest.FromBytes(blob).Encoded())
	if spec.Attester != nil {
		if spec.AttestStatement != nil {
			other := st.Statement()
			spec.AttestStatement(&other)
			if blob, err = other.Sign(spec.Signer); err != nil {
				return nil, err
			}
		}
		if _, err := stagelayout.AttachAttestation(dir, st, blob, spec.Attester); err != nil {
			return nil, err
		}
		s.Blobs["attestation"] = envelopeFile(dir)
	}
	return s, nil
}

// envelopeFile is the blob of the last attestation's envelope in dir.
func envelopeFile(dir string) string {
	var ix stagelayout.Index
	data, _ := os.ReadFile(filepath.Join(dir, "index.json"))
	_ = json.Unmarshal(data, &ix)
	var m stagelayout.Manifest
	data, _ = os.ReadFile(blobFile(dir, ix.Manifests[len(ix.Manifests)-1]))
	_ = json.Unmarshal(data, &m)
	return blobFile(dir, m.Layers[0])
}

func (spec Spec) withDefaults() Spec {
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
	return spec
}

func blobFile(dir string, d stagelayout.Descriptor) string {
	return filepath.Join(dir, "blobs", "sha256", d.Digest.Encoded())
}

// breakSignature changes the first character of the signature to another
// base64 character: still 64 bytes, no longer the signature.
func breakSignature(st stagelayout.Statement, blob []byte) ([]byte, error) {
	var m map[string]string
	if err := json.Unmarshal(blob, &m); err != nil {
		return nil, err
	}
	sig := []byte(m["signature"])
	if sig[0] = 'A'; m["signature"][0] == 'A' {
		sig[0] = 'B'
	}
	st.Signature = string(sig)
	return canon.Canonical(st)
}
