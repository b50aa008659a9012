package jwkset

import (
	"encoding/json"

	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// DomainKeyset is the digest domain of a keyset generation
// (docs/keyset.md, docs/digests.md).
const DomainKeyset = "keyset"

// Digest is the domain-separated SHA-256 of the generation's canonical
// JSON (RFC 8785):
//
//	digest("keyset", canonical({"generation": …, "keys": […], "revokedKids": […]}))
//
// Keys and revoked key IDs keep their order; "use" appears only when set.
// For a parsed file it equals the digest of the file's own JSON text
// canonicalised, since Parse keeps every member.
func (k *Keyset) Digest() (string, error) {
	c, err := k.Canonical()
	if err != nil {
		return "", err
	}
	return canon.DigestBytes(DomainKeyset, c), nil
}

// Canonical is the generation's RFC 8785 canonical JSON.
func (k *Keyset) Canonical() ([]byte, error) {
	return canon.Canonical(k.normal())
}

// Encode is the generation as an indented JSON file (with a final
// newline) that Parse reads back to the same Keyset and the same digest.
func (k *Keyset) Encode() ([]byte, error) {
	out, err := json.MarshalIndent(k.normal(), "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// normal has an empty, not null, revokedKids.
func (k *Keyset) normal() *Keyset {
	n := *k
	if n.RevokedKids == nil {
		n.RevokedKids = []string{}
	}
	return &n
}
