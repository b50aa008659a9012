// Package canon holds the project's canonical forms: RFC 8785 JSON, the
// domain-separated SHA-256 digests (docs/digests.md) and object identities.
// It is a leaf: the offline receipt auditor uses it without pulling in the
// renderer (kustomize) that package inventory needs.
package canon

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Digest domains. Each kind of digest hashes a distinct prefix first, so a
// value digested for one purpose can never stand in for another
// (docs/digests.md).
const (
	DomainSource          = "source"
	DomainRender          = "render"
	DomainInventory       = "inventory"
	DomainLock            = "lock"
	DomainClusterIdentity = "cluster-identity"
	DomainCommand         = "command"
	DomainPreflight       = "preflight"
	DomainTranscript      = "transcript"
	DomainDeployment      = "deployment"
	DomainHeadState       = "head-state"
	DomainHead            = "head"
	DomainReceipt         = "receipt"
	DomainRetiredObject   = "retired-object"
	DomainObject          = "object"
)

// DigestPrefix is prepended to every digest's hex value.
const DigestPrefix = "sha256:"

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// IsDigest reports whether s is a well-formed digest: "sha256:" and 64
// lowercase hex digits.
func IsDigest(s string) bool { return digestRE.MatchString(s) }

// DigestBytes is the domain-separated SHA-256 of data:
//
//	"sha256:" + hex(SHA-256("kubectl-ql3/" + domain + "/v1" + 0x00 + data))
func DigestBytes(domain string, data []byte) string {
	h := newDigest(domain)
	h.Write(data)
	return sumDigest(h)
}

// newDigest is a SHA-256 that has hashed domain's header and the zero
// byte: what follows is the digested data.
func newDigest(domain string) hash.Hash {
	h := sha256.New()
	h.Write([]byte(domainHeader(domain)))
	return h
}

// domainHeader is "kubectl-ql3/" + domain + "/v1" and a zero byte.
func domainHeader(domain string) string { return "kubectl-ql3/" + domain + "/v1\x00" }

func sumDigest(h hash.Hash) string { return DigestPrefix + hex.EncodeToString(h.Sum(nil)) }

// Canonical encodes v as JSON and canonicalises it per RFC 8785 (JCS):
// object members sorted by UTF-16 code units, no insignificant white space,
// ECMAScript number and string forms.
func Canonical(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return CanonicalizeJSON(raw)
}

// CanonicalizeJSON canonicalises JSON text per RFC 8785. Input that is not
// I-JSON (RFC 7493), as RFC 8785 requires, is rejected: invalid UTF-8 and
// lone UTF-16 surrogate escapes have no canonical form.
func CanonicalizeJSON(raw []byte) ([]byte, error) {
	if err := checkUnicode(raw); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	return out, nil
}

// DigestInput is the exact bytes DigestOf(domain, v) hashes: the domain's
// header "kubectl-ql3/" + domain + "/v1", a zero byte, then Canonical(v).
// Its plain SHA-256 is the digest's hex (an attestation subject's file).
func DigestInput(domain string, v any) ([]byte, error) {
	c, err := Canonical(v)
	if err != nil {
		return nil, err
	}
	return append([]byte(domainHeader(domain)), c...), nil
}

// DigestOf is DigestBytes(domain, Canonical(v)).
func DigestOf(domain string, v any) (string, error) {
	c, err := Canonical(v)
	if err != nil {
		return "", err
	}
	return DigestBytes(domain, c), nil
}

// DigestOfArray is DigestOf(domain, items): the same digest, computed one
// element at a time. RFC 8785 serialises an array as "[", its elements'
// canonical forms separated by ",", and "]", so the canonical form of a
// whole release is never built: hashing 10,000 objects holds one object's
// canonical JSON at a time, not the release's JSON three times over (the
// encoding, the canonicaliser's tree and its output). A nil items is the
// empty array, as DigestOf of an empty slice.
func DigestOfArray[T any](domain string, items []T) (string, error) {
	return DigestOfMemberArray(domain, nil, "", items)
}

// arrayPlaceholder stands for the array in DigestOfMemberArray's shell.
const arrayPlaceholder = "kubectl-ql3 array placeholder \ufffe"

// DigestOfMemberArray is DigestOf(domain, obj with obj[member] = items),
// the array hashed one element at a time as DigestOfArray does; obj is not
// modified. A nil obj digests the array alone. The shell (obj with a
// placeholder string for the array) is canonicalised whole; should the
// placeholder's canonical form occur in it more than once, the whole value
// is canonicalised instead, so the digest is DigestOf's in every case.
func DigestOfMemberArray[T any](domain string, obj map[string]any, member string, items []T) (string, error) {
	if items == nil {
		items = []T{}
	}
	a, err := NewMemberArrayDigest(domain, obj, member)
	if errors.Is(err, errPlaceholderInShell) {
		whole := maps.Clone(obj)
		whole[member] = items
		return DigestOf(domain, whole)
	}
	if err != nil {
		return "", err
	}
	for i, item := range items {
		if _, err := a.Add(item); err != nil {
			return "", fmt.Errorf("%s: %w", strings.TrimSpace(member+" element "+strconv.Itoa(i)), err)
		}
	}
	return a.Sum(), nil
}

// errPlaceholderInShell: the shell cannot be split around its array.
var errPlaceholderInShell = errors.New("the object holds the array placeholder itself: digest it whole")

// ErrPlaceholderInShell is NewArrayDigestIn's error for a shell that holds
// ArrayPlaceholder other than exactly once: digest the whole value instead.
var ErrPlaceholderInShell = errPlaceholderInShell

// ArrayPlaceholder is the string that stands for the array in the shell of
// NewArrayDigestIn.
const ArrayPlaceholder = arrayPlaceholder

// NewMemberArrayDigest starts DigestOf(domain, obj with obj[member] = the
// array to be added), for an array that is never held whole: Add each
// element in order, then Sum. obj is not modified; a nil obj digests the
// array alone. It fails when obj itself holds the placeholder that stands
// for the array in its canonical form (DigestOfMemberArray then digests
// the whole value).
func NewMemberArrayDigest(domain string, obj map[string]any, member string) (*ArrayDigest, error) {
	if obj == nil {
		return newArrayDigest(domain, nil, nil), nil
	}
	shell := maps.Clone(obj)
	shell[member] = arrayPlaceholder
	return NewArrayDigestIn(domain, shell)
}

// NewArrayDigestIn starts DigestOf(domain, shell with the string
// ArrayPlaceholder, wherever it stands in it, replaced by the array to be
// added): Add each element in order, then Sum. The shell is canonicalised
// whole, then split at the placeholder's canonical form; it fails with
// ErrPlaceholderInShell unless that form occurs in it exactly once (the
// caller then digests the whole value).
func NewArrayDigestIn(domain string, shell any) (*ArrayDigest, error) {
	c, err := Canonical(shell)
	if err != nil {
		return nil, err
	}
	mark, err := Canonical(arrayPlaceholder)
	if err != nil {
		return nil, err
	}
	if bytes.Count(c, mark) != 1 {
		return nil, errPlaceholderInShell
	}
	i := bytes.Index(c, mark)
	return newArrayDigest(domain, c[:i], c[i+len(mark):]), nil
}

// ArrayDigest is DigestOfArray fed one element at a time, for an array
// that is never held whole: NewArrayDigest, Add each element in order,
// then Sum.
type ArrayDigest struct {
	h     hash.Hash
	n     int
	after []byte
}

// NewArrayDigest starts DigestOf(domain, the array to be added).
func NewArrayDigest(domain string) *ArrayDigest { return newArrayDigest(domain, nil, nil) }

func newArrayDigest(domain string, before, after []byte) *ArrayDigest {
	h := newDigest(domain)
	h.Write(before)
	h.Write([]byte{'['})
	return &ArrayDigest{h: h, after: after}
}

// Add hashes the next element and returns its canonical JSON, the exact
// bytes hashed.
func (a *ArrayDigest) Add(item any) ([]byte, error) {
	c, err := Canonical(item)
	if err != nil {
		return nil, err
	}
	a.AddCanonical(c)
	return c, nil
}

// AddCanonical hashes the next element given as its canonical JSON, c,
// which the caller vouches for (AppendCanonical of an Identity).
func (a *ArrayDigest) AddCanonical(c []byte) {
	if a.n > 0 {
		a.h.Write([]byte{','})
	}
	a.n++
	a.h.Write(c)
}

// Sum is the digest of the elements added; call it once, last.
func (a *ArrayDigest) Sum() string {
	a.h.Write([]byte{']'})
	a.h.Write(a.after)
	return sumDigest(a.h)
}

// ClusterIdentity is the target's identity: the domain-separated digest of
// the kube-system Namespace UID.
func ClusterIdentity(kubeSystemUID string) string {
	return DigestBytes(DomainClusterIdentity, []byte(kubeSystemUID))
}

// checkUnicode rejects text that is not JSON, or that has invalid UTF-8 or
// a \u escape of a UTF-16 surrogate outside a high-low pair.
func checkUnicode(raw []byte) error {
	if !utf8.Valid(raw) {
		return errors.New("invalid UTF-8")
	}
	if !json.Valid(raw) {
		return errors.New("invalid JSON")
	}
	surrogate := func(i int) (rune, bool) { // the \uXXXX escape at raw[i:], if any
		if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
		return rune(n), err == nil && utf16.IsSurrogate(rune(n))
	}
	inString := false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\':
			r, ok := surrogate(i)
			if !ok {
				i++ // skip the escaped character
				continue
			}
			if low, ok := surrogate(i + 6); r < 0xdc00 && ok && low >= 0xdc00 {
				i += 11
				continue
			}
			return fmt.Errorf("lone surrogate \\u%04x at offset %d", r, i)
		}
	}
	return nil
}
