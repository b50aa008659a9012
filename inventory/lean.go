package inventory

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/qinglong/kubectl-ql3/inventory/canon"
	"github.com/qinglong/kubectl-ql3/inventory/rendercache"
)

// LeanObjects are a release's objects as LoadReleaseCached keeps them with
// Options.Lean: each the JSON the render cache entry holds, whose decoded
// form the render digest covered, decoded again only when taken, so that a release of 10,000 objects is held as
// its JSON (about 12 MB) rather than decoded (several times that).
type LeanObjects struct {
	json [][]byte
	ids  []Identity
}

// Len is the number of objects.
func (l *LeanObjects) Len() int { return len(l.json) }

// ID is object i's identity (the release's Inventory[i]).
func (l *LeanObjects) ID(i int) Identity { return l.ids[i] }

// Peek decodes object i and keeps its JSON.
func (l *LeanObjects) Peek(i int) (*unstructured.Unstructured, error) {
	if l.json[i] == nil {
		return nil, fmt.Errorf("object %s was already taken", l.ids[i])
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(l.json[i]); err != nil {
		return nil, fmt.Errorf("object %s: %w", l.ids[i], err)
	}
	return u, nil
}

// Take decodes object i and lets its JSON go: each object is taken once.
// Different objects may be taken concurrently.
func (l *LeanObjects) Take(i int) (*unstructured.Unstructured, error) {
	u, err := l.Peek(i)
	l.json[i] = nil
	return u, err
}

// leanRelease is the release of cache entry e checked as Render checks a
// fresh render, one object decoded at a time: a first pass reads the
// identities (which must be in inventory order, as an entry stored from a
// render is) and the release's CustomResourceDefinitions (for scopes); a
// second checks each object and hashes it into the render digest; the
// entry's JSON of each object is kept. nil and why not when it fails; never a
// release the decoded path would refuse.
func leanRelease(dir string, e *rendercache.Entry, files map[string][]byte, opts Options) (*Release, string) {
	c := newChecker(dir, files, opts)
	c.lean = true
	ids := make([]Identity, len(e.Objects))
	for i, raw := range e.Objects {
		u, reason := cachedObject(i, raw)
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
	for i, raw := range e.Objects {
		u, reason := cachedObject(i, raw)
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
	// The entry's own bytes are kept, not the canonical forms hashed (a
	// second copy of the release): decoding them again gives exactly the
	// objects checked and hashed here, and nothing else holds them.
	kept := make([][]byte, len(e.Objects))
	for i, raw := range e.Objects {
		kept[i], e.Objects[i] = raw, nil
	}
	r.Lean = &LeanObjects{json: kept, ids: r.Inventory}
	return r, ""
}
