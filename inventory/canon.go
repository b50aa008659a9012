package inventory

import "github.com/qinglong/kubectl-ql3/inventory/canon"

// The canonical forms live in the leaf package canon (so that the offline
// receipt auditor does not import the renderer); these names keep them
// where the rest of the project has always found them.

// Identity names one object: apiVersion/kind/namespace/name.
type Identity = canon.Identity

// Digest domains (docs/digests.md).
const (
	DomainSource          = canon.DomainSource
	DomainRender          = canon.DomainRender
	DomainInventory       = canon.DomainInventory
	DomainLock            = canon.DomainLock
	DomainClusterIdentity = canon.DomainClusterIdentity
	DomainCommand         = canon.DomainCommand
	DomainPreflight       = canon.DomainPreflight
	DomainTranscript      = canon.DomainTranscript
	DomainDeployment      = canon.DomainDeployment
	DomainHeadState       = canon.DomainHeadState
	DomainHead            = canon.DomainHead
	DomainReceipt         = canon.DomainReceipt
	DomainRetiredObject   = canon.DomainRetiredObject
	DomainObject          = canon.DomainObject
)

// DigestPrefix is prepended to every digest's hex value.
const DigestPrefix = canon.DigestPrefix

// IsDigest reports whether s is "sha256:" and 64 lowercase hex digits.
func IsDigest(s string) bool { return canon.IsDigest(s) }

// DigestBytes is the domain-separated SHA-256 of data.
func DigestBytes(domain string, data []byte) string { return canon.DigestBytes(domain, data) }

// Canonical encodes v as RFC 8785 canonical JSON.
func Canonical(v any) ([]byte, error) { return canon.Canonical(v) }

// CanonicalizeJSON canonicalises JSON text per RFC 8785.
func CanonicalizeJSON(raw []byte) ([]byte, error) { return canon.CanonicalizeJSON(raw) }

// DigestInput is the exact bytes DigestOf(domain, v) hashes.
func DigestInput(domain string, v any) ([]byte, error) { return canon.DigestInput(domain, v) }

// DigestOf is DigestBytes(domain, Canonical(v)).
func DigestOf(domain string, v any) (string, error) { return canon.DigestOf(domain, v) }

// ClusterIdentity is the digest of the kube-system Namespace UID.
func ClusterIdentity(kubeSystemUID string) string { return canon.ClusterIdentity(kubeSystemUID) }

// Compare orders identities by the 4-tuple.
func Compare(a, b Identity) int { return canon.Compare(a, b) }

// SortIdentities sorts ids by Compare.
func SortIdentities(ids []Identity) { canon.SortIdentities(ids) }

// CheckSortedUnique reports the first identity out of order or repeated.
func CheckSortedUnique(ids []Identity) error { return canon.CheckSortedUnique(ids) }

// InventoryDigest is the digest of the sorted identity list.
func InventoryDigest(ids []Identity) (string, error) { return canon.InventoryDigest(ids) }

// Missing lists the identities of a whose object (by Key) b lacks.
func Missing(a, b []Identity) []Identity { return canon.Missing(a, b) }

// SameObjects reports whether a and b name the same objects by Key.
func SameObjects(a, b []Identity) bool { return canon.SameObjects(a, b) }

// Key is an object's identity across API versions: group, kind, namespace
// and name.
type Key = canon.Key

// Names reserved for the Head: a release may define no ConfigMap named
// HeadName, and a lock's tool.fieldManager is never HeadFieldManager.
const (
	HeadName         = canon.HeadName
	HeadFieldManager = canon.HeadFieldManager
)

// IsHead reports whether id names a ConfigMap called HeadName.
func IsHead(id Identity) bool { return canon.IsHead(id) }
