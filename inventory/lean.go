package inventory

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qinglong/kubectl-ql3/inventory/canon"
	"github.com/qinglong/kubectl-ql3/inventory/rendercache"
)

// LeanObjects are a release's objects as LoadReleaseCached keeps them with
// Options.Lean: in the render cache entry's file, each read again (its
// bytes checked against the digest taken when the entry's MAC was
// verified) and decoded only when asked for, so that a release of 10,000
// objects holds neither its decoded objects (several times 8 MB) nor
// their JSON (8 MB). Close lets the file go.
type LeanObjects struct {
	entry *rendercache.LeanEntry
	ids   []Identity
}

// Len is the number of objects.
func (l *LeanObjects) Len() int { return len(l.ids) }

// ID is object i's identity (the release's Inventory[i]).
func (l *LeanObjects) ID(i int) Identity { return l.ids[i] }

// Object reads and decodes object i: the object checked and hashed into
// the render digest when the release was loaded. Different objects may be
// read concurrently.
func (l *LeanObjects) Object(i int) (*unstructured.Unstructured, error) {
	raw, err := l.entry.Object(i)
	if err != nil {
		return nil, err
	}
	u, reason := cachedObject(i, raw)
	if u == nil {
		return nil, fmt.Errorf("object %s: %s", l.ids[i], reason)
	}
	return u, nil
}

// Close lets the entry's file go.
func (l *LeanObjects) Close() error { return l.entry.Close() }

// leanRelease is the release of cache entry e checked as Render checks a
// fresh render, one object read and decoded at a time: a first pass reads
// the identities (which must be in inventory order, as an entry stored
// from a render is) and the release's CustomResourceDefinitions (for
// scopes); a second checks each object and hashes it into the render
// digest. The objects stay in e, which the release's Lean then holds. nil
// and why not when it fails; never a release the decoded path would
// refuse.
func leanRelease(dir string, e *rendercache.LeanEntry, files map[string][]byte, opts Options) (*Release, string) {
	c := newChecker(dir, files, opts)
	c.lean = true
	ids := make([]Identity, e.Len())
	for i := range ids {
		u, reason := leanObject(e, i)
		if u == nil {
			return nil, reason
		}
		if ids[i] = IdentityOf(u); ids[i].Name == "" || i > 0 && Compare(ids[i-1], ids[i]) >= 0 {
			return nil, "entry objects are not in inventory order"
		}
		if err := c.scopes.addCRD(ids[i], u); err != nil {
			return nil, "cached objects fail the release checks"
		}
	}
	sum := canon.NewArrayDigest(DomainRender)
	for i := range ids {
		u, reason := leanObject(e, i)
		if u == nil {
			return nil, reason
		}
		if err := c.object(entry{ids[i], u}); err != nil {
			return nil, "cached objects fail the release checks"
		}
		if _, err := sum.Add(u.Object); err != nil {
			return nil, "entry objects: " + err.Error()
		}
	}
	if err := c.finish(); err != nil {
		return nil, "cached objects fail the release checks"
	}
	if len(c.secrets) > 0 {
		return nil, "entry holds Secret values"
	}
	r := c.r
	r.RenderDigest, r.SecretValuesCovered = sum.Sum(), true
	r.Lean = &LeanObjects{entry: e, ids: r.Inventory}
	return r, ""
}

// leanObject reads and decodes object i of e, or nil and why not.
func leanObject(e *rendercache.LeanEntry, i int) (*unstructured.Unstructured, string) {
	raw, err := e.Object(i)
	if err != nil {
		return nil, err.Error()
	}
	return cachedObject(i, raw)
}
