package inventory

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/qinglong/kubectl-ql3/third_party/kustomize-api/konfig"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/inventory/rendercache"
)

// CacheUse says how LoadReleaseCached obtained the render.
type CacheUse struct {
	// Hit is true when the objects came from the render cache.
	Hit bool
	// Reason says why the cache was not used, or was not filled, when it
	// matters ("no entry", "source files changed", "Secret data: not
	// cached", …); empty on a hit.
	Reason string
	// Stored is true when a fresh render was written to the cache.
	Stored bool
}

// String is the progress wording: "cache hit", or "cache miss (reason)"
// with ", stored" when the fresh render was stored.
func (u CacheUse) String() string {
	s := "cache miss"
	switch {
	case u.Hit:
		return "cache hit"
	case u.Reason != "":
		s += " (" + u.Reason + ")"
	}
	if u.Stored {
		s += ", stored"
	}
	return s
}

// LoadReleaseCached is LoadRelease with a render cache (docs/render-cache.md).
// With a nil cache it is LoadRelease. Otherwise it hashes the source files
// the lock lists; when each equals the lock's digest, it reads the entry
// keyed by the lock's source digest and the cache's build (used only if its
// MAC verifies under the cache's key: rendercache.Cache.Get, or GetLean
// with opts.Lean, which leaves the objects in the entry file), re-checks the
// cached objects as Render checks a fresh render, recomputes their render
// and inventory digests, and uses them only if the release they make
// verifies against the lock (VerifyLock). Any failure on that path is a
// miss: the release is rendered as LoadRelease does, and a verified fresh
// render is stored. A render holding Secret values is never read from or
// written to the cache.
func LoadReleaseCached(fsys filesys.FileSystem, dir string, opts Options, cache *rendercache.Cache) (*Release, *Lock, CacheUse, error) {
	if cache == nil {
		r, l, err := LoadRelease(fsys, dir, opts)
		return r, l, CacheUse{Reason: "disabled"}, err
	}
	l, err := ReadLock(fsys, dir)
	if err != nil {
		return nil, nil, CacheUse{}, err
	}
	r, reason := fromCache(fsys, dir, opts, l, cache)
	if r != nil {
		return r, l, CacheUse{Hit: true}, nil
	}
	r, err = Render(fsys, dir, opts)
	if err != nil {
		return nil, nil, CacheUse{Reason: reason}, err
	}
	if err := VerifyLock(l, r); err != nil {
		return nil, nil, CacheUse{Reason: reason}, err
	}
	use := CacheUse{Reason: reason}
	switch err := StoreRender(cache, r); {
	case errors.Is(err, errNotCacheable):
		use.Reason = "Secret data: not cached"
	case errors.Is(err, errInexact):
		use.Reason = "numbers from 2^53 on: not cached"
	case err != nil:
		use.Reason = reason + "; not stored: " + err.Error()
	default:
		use.Stored = true
	}
	return r, l, use, nil
}

var (
	errNotCacheable = errors.New("the render holds Secret values")
	errInexact      = errors.New("the render holds numbers its render digest does not tell apart (magnitudes from 2^53 on, or -0)")
)

// StoreRender writes a fresh render r to the cache under its source digest
// and the cache's build. A render that holds Secret values (any Secret
// with data or stringData, admitted with --allow-secret-data) is never
// stored, nor one with a number the render digest cannot tell apart from
// another (exactNumbers): the error then says so.
func StoreRender(cache *rendercache.Cache, r *Release) error {
	if hasSecretValues(r) {
		return errNotCacheable
	}
	for _, o := range r.Objects {
		if !exactNumbers(o.Object) {
			return errInexact
		}
	}
	src, err := cacheSourceKey(r.SourceDigest, r.Helm)
	if err != nil {
		return err
	}
	key, err := rendercache.Key(src, cache.Build)
	if err != nil {
		return err
	}
	e := &rendercache.Entry{Key: key, SourceDigest: r.SourceDigest, RenderDigest: r.RenderDigest, InventoryDigest: r.InventoryDigest}
	for _, o := range r.Objects {
		data, err := json.Marshal(o.Object)
		if err != nil {
			return fmt.Errorf("render cache: object %s: %w", o.GetName(), err)
		}
		e.Objects = append(e.Objects, data)
	}
	return cache.Put(e)
}

// hasSecretValues reports whether any source file digest is keyed or
// redacted, or any object is a Secret with values.
func hasSecretValues(r *Release) bool {
	for _, f := range r.Sources {
		if !strings.HasPrefix(f.Digest, DigestPrefix) {
			return true
		}
	}
	for i, o := range r.Objects {
		if vals, err := secretValuesOf(r.Inventory[i], o); err != nil || len(vals) > 0 {
			return true
		}
	}
	return false
}

// fromCache builds the release from the cache entry for l, or returns nil
// and why not. Nothing the entry says is trusted: only the objects are
// taken, and only if they re-derive the lock's digests.
func fromCache(fsys filesys.FileSystem, dir string, opts Options, l *Lock, cache *rendercache.Cache) (*Release, string) {
	files, reason := lockedSources(fsys, dir, l)
	if files == nil {
		return nil, reason
	}
	if !chartTreesListed(fsys, dir, l) {
		return nil, "source files changed"
	}
	src, err := cacheSourceKey(l.Source.Digest, l.Helm)
	if err != nil {
		return nil, err.Error()
	}
	key, err := rendercache.Key(src, cache.Build)
	if err != nil {
		return nil, err.Error()
	}
	if opts.Lean {
		return leanFromCache(dir, files, opts, l, cache, key)
	}
	e, err := cache.Get(key)
	if err != nil {
		return nil, strings.TrimPrefix(err.Error(), rendercache.ErrMiss.Error()+": ")
	}
	if reason := sameState(e, l); reason != "" {
		return nil, reason
	}
	r, reason := decodedRelease(dir, e, files, opts)
	if r == nil {
		return nil, reason
	}
	return cachedRelease(r, l, cache, key)
}

// leanFromCache is fromCache's release with Options.Lean: its objects
// left in the entry's file, which the release holds open (Lean.Close).
func leanFromCache(dir string, files map[string][]byte, opts Options, l *Lock, cache *rendercache.Cache, key string) (*Release, string) {
	e, err := cache.GetLean(key)
	if err != nil {
		return nil, strings.TrimPrefix(err.Error(), rendercache.ErrMiss.Error()+": ")
	}
	r, reason := (*Release)(nil), sameState(&e.Entry, l)
	if reason == "" {
		r, reason = leanRelease(dir, e, files, opts)
	}
	if r != nil {
		r, reason = cachedRelease(r, l, cache, key)
	}
	if r == nil {
		_ = e.Close()
	}
	return r, reason
}

// sameState is "" when entry e is for the release state lock l binds.
func sameState(e *rendercache.Entry, l *Lock) string {
	if e.RenderDigest != l.Render.Digest || e.InventoryDigest != l.Render.InventoryDigest || e.SourceDigest != l.Source.Digest {
		return "entry is for another release state"
	}
	return ""
}

// cachedRelease completes r, checked from the entry for key, with what the
// lock l binds, and verifies it against l; nil and why not.
func cachedRelease(r *Release, l *Lock, cache *rendercache.Cache, key string) (*Release, string) {
	var err error
	r.Sources = slices.Clone(l.Source.Files)
	r.SourceDigest = l.Source.Digest
	// The key bound the helm section: the entry was stored from a fresh
	// render whose section is this one.
	r.Helm = l.Helm.clone()
	if len(r.Images) == 0 {
		r.Images = []string{}
	}
	if r.InventoryDigest, err = InventoryDigest(r.Inventory); err != nil {
		return nil, "entry inventory: " + err.Error()
	}
	if VerifyLock(l, r) != nil {
		return nil, "entry does not match the lock"
	}
	cache.Touch(key, time.Now())
	return r, ""
}

// decodedRelease is the release of cache entry e with every object
// decoded, checked as Render checks a fresh render, and its render digest
// recomputed; nil and why not when it fails.
func decodedRelease(dir string, e *rendercache.Entry, files map[string][]byte, opts Options) (*Release, string) {
	objs := make([]*unstructured.Unstructured, len(e.Objects))
	for i, raw := range e.Objects {
		u, reason := cachedObject(i, raw)
		if u == nil {
			return nil, reason
		}
		objs[i] = u
		e.Objects[i] = nil // decoded: the JSON is not held beside the object (10 MB at 10,000 objects)
	}
	r, secrets, err := check(dir, objs, files, opts)
	if err != nil {
		return nil, "cached objects fail the release checks"
	}
	if len(secrets) > 0 {
		return nil, "entry holds Secret values"
	}
	r.redacted, r.SecretValuesCovered = r.Objects, true
	if r.RenderDigest, err = RenderDigest(r.redacted); err != nil {
		return nil, "entry objects: " + err.Error()
	}
	return r, ""
}

// cachedObject decodes object i of a cache entry: a JSON object (not a
// list) with no number the render digest cannot tell apart; or nil and why
// not.
func cachedObject(i int, raw []byte) (*unstructured.Unstructured, string) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil || u.IsList() {
		return nil, fmt.Sprintf("entry object %d is not an object", i)
	}
	if !exactNumbers(u.Object) {
		return nil, "entry holds numbers from 2^53 on"
	}
	return u, ""
}

// lockedSources reads every source file the lock lists and checks it
// against the lock's digest; it returns the files' paths (as map keys, no
// contents), or nil and why not. A lock with keyed or redacted entries (Secret data) is never served
// from the cache. Each directory holding a kustomization file must hold no
// other recognised kustomization file name: kustomize would refuse such a
// directory, and the lock's file list alone would not show it.
func lockedSources(fsys filesys.FileSystem, dir string, l *Lock) (map[string][]byte, string) {
	files := make(map[string][]byte, len(l.Source.Files))
	names := konfig.RecognizedKustomizationFileNames()
	for _, f := range l.Source.Files {
		if !strings.HasPrefix(f.Digest, DigestPrefix) {
			return nil, "Secret data: not cached"
		}
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		data, err := fsys.ReadFile(p)
		if err != nil {
			return nil, "source files changed"
		}
		if FileDigest(data) != f.Digest {
			return nil, "source files changed"
		}
		// Only the names are kept: the checks use the contents to name the
		// file an error comes from, and on this path an error is a miss
		// that names none (a 10,000-object release's sources are 8 MB).
		files[f.Path] = nil
		if base := filepath.Base(p); slices.Contains(names, base) {
			for _, other := range names {
				if other != base && fsys.Exists(filepath.Join(filepath.Dir(p), other)) {
					return nil, "source files changed"
				}
			}
		}
	}
	return files, ""
}

// maxExact is 2^53. An integer of smaller magnitude is exactly a double
// no other integer rounds to; from 2^53 on, neighbours share a double
// (2^53+1 rounds to 2^53), so RFC 8785 writes them alike.
const maxExact = 1 << 53

// exactNumbers reports whether every number in v is one the render
// digest's canonical JSON tells apart from every value the JSON encoder
// would send differently: an int64 or float64 of magnitude below 2^53,
// not negative zero, not NaN or infinite. Two objects made of such values
// with the same canonical JSON encode to the same request body (an
// integral float64 and the equal int64 encode alike), so the render digest
// check binds what is applied (docs/render-cache.md, "Soundness").
func exactNumbers(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			if !exactNumbers(e) {
				return false
			}
		}
	case []any:
		for _, e := range x {
			if !exactNumbers(e) {
				return false
			}
		}
	case int64:
		return x > -maxExact && x < maxExact
	case float64:
		return x > -maxExact && x < maxExact && !(x == 0 && math.Signbit(x)) // NaN fails the comparisons
	case string, bool, nil:
	default:
		return false
	}
	return true
}
