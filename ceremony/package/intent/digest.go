package intent

import (
	"encoding/base32"
	"encoding/hex"
	"strings"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/strictjson"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// Digest domains (docs/digests.md, docs/package-pointer.md).
const (
	// DomainIntent is the digest domain of an activation intent.
	DomainIntent = "package-activation-intent"
	// DomainTarget is the digest domain of a package target identity.
	DomainTarget = "package-target"
)

// Names of the active pointer (docs/package-pointer.md).
const (
	// NamePrefix starts every active pointer ConfigMap's name.
	NamePrefix = "ql3p-"
	// TargetLabel holds the full target digest, encoded by LabelValue.
	TargetLabel = "qinglong.io/package-target"
	// IntentDigestAnnotation holds the intent digest.
	IntentDigestAnnotation = "qinglong.io/intent-digest"
	// ActiveKey is the only data key of the pointer ConfigMap.
	ActiveKey = "active.json"
)

// nameBytes is 208 bits: the part of the target digest the name carries.
const nameBytes = 26

// b32 is RFC 4648 base32 in lowercase, without padding.
var b32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Canonical is the intent's RFC 8785 canonical JSON, after Normalize.
func Canonical(in Intent) ([]byte, error) {
	n, err := Normalize(in)
	if err != nil {
		return nil, err
	}
	return canon.Canonical(n)
}

// Digest is the intent digest:
//
//	digest("package-activation-intent", canonical(intent))
func Digest(in Intent) (string, error) {
	c, err := Canonical(in)
	if err != nil {
		return "", err
	}
	return canon.DigestBytes(DomainIntent, c), nil
}

// Target is the target identity an intent names: the cluster, namespace,
// project and package, and nothing else, so every generation of one
// package on one cluster shares it.
type Target struct {
	ClusterIdentity string `json:"clusterIdentity"`
	Namespace       string `json:"namespace"`
	ProjectID       string `json:"projectId"`
	PackageID       string `json:"packageId"`
}

// TargetOf is the target identity of in, after Normalize.
func TargetOf(in Intent) (Target, error) {
	n, err := Normalize(in)
	if err != nil {
		return Target{}, err
	}
	return Target{ClusterIdentity: n.ClusterIdentity, Namespace: n.Namespace, ProjectID: n.ProjectID, PackageID: n.PackageID}, nil
}

// Digest is the target digest:
//
//	digest("package-target", canonical({"clusterIdentity", "namespace", "packageId", "projectId"}))
func (t Target) Digest() (string, error) {
	return canon.DigestOf(DomainTarget, t)
}

// Naming is where the active pointer of one target lives and how it is
// labelled.
type Naming struct {
	// TargetDigest is the full target digest, "sha256:" + 64 hex.
	TargetDigest string `json:"targetDigest"`
	// Name is the ConfigMap name: NamePrefix + base32 of the digest's
	// first 208 bits (47 characters).
	Name string `json:"name"`
	// Label is the TargetLabel value: base32 of all 256 bits (52
	// characters).
	Label string `json:"label"`
}

// NamingOf is the pointer naming of in's target.
func NamingOf(in Intent) (Naming, error) {
	t, err := TargetOf(in)
	if err != nil {
		return Naming{}, err
	}
	d, err := t.Digest()
	if err != nil {
		return Naming{}, err
	}
	return namingOfDigest(d), nil
}

// NamingOfTarget is the pointer naming of target t (its members are not
// checked here: build t from a normalised intent or checked ids).
func NamingOfTarget(t Target) (Naming, error) {
	d, err := t.Digest()
	if err != nil {
		return Naming{}, err
	}
	return namingOfDigest(d), nil
}

// namingOfDigest derives the name and label from a well-formed digest.
func namingOfDigest(d string) Naming {
	raw, _ := hex.DecodeString(strings.TrimPrefix(d, canon.DigestPrefix))
	return Naming{TargetDigest: d, Name: NamePrefix + b32.EncodeToString(raw[:nameBytes]), Label: b32.EncodeToString(raw)}
}

// VerifyNaming recomputes the target of in and compares it with the name
// and TargetLabel value a pointer was read under; a difference is
// fail.Tamper: the pointer does not belong to the target its intent names.
func VerifyNaming(in Intent, name, label string) error {
	want, err := NamingOf(in)
	if err != nil {
		return err
	}
	if name != want.Name {
		return fail.Errorf(fail.Tamper, "active pointer %q holds an intent for target %s, whose pointer is %q; do not use it, inspect who wrote it", strictjson.Clip(name), want.TargetDigest, want.Name)
	}
	if label != want.Label {
		return fail.Errorf(fail.Tamper, "active pointer %q: label %s=%q does not encode target %s (want %q); do not use it, inspect who wrote it", name, TargetLabel, strictjson.Clip(label), want.TargetDigest, want.Label)
	}
	return nil
}
