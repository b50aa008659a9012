// Package rendercache is the content-addressed store of rendered releases
// (docs/render-cache.md). An entry holds the canonical rendered objects of
// one release state, keyed by the release's source digest and the plugin
// build that rendered it, and carries a MAC under a key kept outside the
// cache directory: an entry is used only if a holder of that key (this
// installation) wrote it. Whoever reads an entry also recomputes its render
// digest and uses it only when that equals the digest the release's lock
// binds.
//
// The package is offline and pure: no client-go, no kustomize.
package rendercache

import (
	"bytes"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/safefile"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

const (
	// Schema is every entry's schema field.
	Schema = "kubectl-ql3/render-cache@v2"
	// MaxEntryBytes bounds an entry file: a larger one is never read, and a
	// render that would make one is not stored.
	MaxEntryBytes = 64 << 20
	// DomainKey is the digest domain of cache keys.
	DomainKey = "render-cache-key"
	// DomainBuild is the digest domain of build identities.
	DomainBuild = "render-cache-build"
	// entrySuffix ends every entry's file name.
	entrySuffix = ".json"
	// tempPrefix starts the temporary files of unfinished writes.
	tempPrefix = ".tmp-"
)

// Cache is a render cache directory.
type Cache struct {
	// Dir holds the entries; it is created 0700 on first write.
	Dir string
	// Build identifies the plugin build (BuildID); it is part of every key.
	Build string
	// MACKey authenticates entries (LoadKey): Get uses only entries whose
	// MAC under it verifies, Put writes it. Without it nothing is read or
	// written.
	MACKey []byte
}

// DefaultDir is $XDG_CACHE_HOME/kubectl-ql3/render (os.UserCacheDir).
func DefaultDir() (string, error) {
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fail.Errorf(fail.Unavailable, "render cache: no user cache directory (%v); set XDG_CACHE_HOME or HOME, or pass --no-cache", err)
	}
	return filepath.Join(d, "kubectl-ql3", "render"), nil
}

// Open is the cache in DefaultDir for the running binary's build, with
// the key at DefaultKeyPath (created on first use). how is BuildID's note
// ("" for a build its build information identifies). Any error means the
// cache is off.
func Open() (c *Cache, how string, err error) {
	c = &Cache{}
	if c.Dir, err = DefaultDir(); err != nil {
		return nil, "", err
	}
	if c.Build, how, err = BuildID(); err != nil {
		return nil, "", fail.Errorf(fail.Unavailable, "render cache: %w", err)
	}
	kp, err := DefaultKeyPath()
	if err != nil {
		return nil, "", err
	}
	if c.MACKey, err = LoadKey(kp); err != nil {
		return nil, "", err
	}
	return c, how, nil
}

// Key is the cache key of a release state: the canonical JSON of
// {"build": build, "schema": Schema, "sourceDigest": sourceDigest} under
// DomainKey.
func Key(sourceDigest, build string) (string, error) {
	if !canon.IsDigest(sourceDigest) || !canon.IsDigest(build) {
		return "", fail.Errorf(fail.Invalid, "render cache key: source digest %q and build %q must be digests", sourceDigest, build)
	}
	return canon.DigestOf(DomainKey, map[string]string{"schema": Schema, "sourceDigest": sourceDigest, "build": build})
}

// Entry is one cached render.
type Entry struct {
	Schema string `json:"schema"`
	// Key is the entry's cache key; its file is named after it.
	Key             string `json:"key"`
	SourceDigest    string `json:"sourceDigest"`
	RenderDigest    string `json:"renderDigest"`
	InventoryDigest string `json:"inventoryDigest"`
	// Objects are the rendered objects in inventory order, each as JSON.
	Objects []json.RawMessage `json:"objects"`
}

// ParseEntry decodes an entry strictly: one JSON object, each member once,
// no unknown member, the schema, digests and objects present. It does not
// recompute any digest; that is the reader's job. The error is
// fail.Invalid. The objects are slices of data, not copies (data must not
// change while they are used), and the entry is read member by member, one
// object at a time: at 10,000 objects the decoder never buffers the 8 MB
// array, nor is any object held twice.
func ParseEntry(data []byte) (*Entry, error) {
	var objs []json.RawMessage
	e, err := parseEntry(bytes.NewReader(data), func(raw json.RawMessage, end int64) error {
		if start := end - int64(len(raw)); start >= 0 && bytes.Equal(data[start:end], raw) {
			raw = data[start:end:end]
		}
		objs = append(objs, raw)
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.Objects = objs
	return e, nil
}

// parseEntry reads an entry from r one member, and one object, at a time,
// handing each object to obj with the offset in r just past it, and checks
// it as ParseEntry documents; the entry returned has no Objects (obj
// keeps them). Errors are fail.Invalid.
func parseEntry(r io.Reader, obj func(raw json.RawMessage, end int64) error) (*Entry, error) {
	e, n, err := readEntry(r, obj)
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "render cache entry: %w", err)
	}
	switch {
	case e.Schema != Schema:
		return nil, fail.Errorf(fail.Invalid, "render cache entry: schema %q is not %q", e.Schema, Schema)
	case !canon.IsDigest(e.Key), !canon.IsDigest(e.SourceDigest), !canon.IsDigest(e.RenderDigest), !canon.IsDigest(e.InventoryDigest):
		return nil, fail.Errorf(fail.Invalid, "render cache entry: key, sourceDigest, renderDigest and inventoryDigest must be digests")
	case n == 0:
		return nil, fail.Errorf(fail.Invalid, "render cache entry: objects: required")
	}
	return e, nil
}

// readEntry reads the entry's members one token at a time; n is the
// number of objects handed to obj.
func readEntry(r io.Reader, obj func(raw json.RawMessage, end int64) error) (e *Entry, n int, err error) {
	dec := json.NewDecoder(r)
	if err := delim(dec, '{'); err != nil {
		return nil, 0, err
	}
	e = &Entry{}
	fields := map[string]*string{"schema": &e.Schema, "key": &e.Key, "sourceDigest": &e.SourceDigest, "renderDigest": &e.RenderDigest, "inventoryDigest": &e.InventoryDigest}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, 0, err
		}
		name, _ := t.(string)
		if seen[name] {
			return nil, 0, fmt.Errorf("member %q twice", name)
		}
		seen[name] = true
		if f, ok := fields[name]; ok {
			err = dec.Decode(f)
		} else if name == "objects" {
			n, err = objectsOf(dec, obj)
		} else {
			err = fmt.Errorf("json: unknown field %q", name)
		}
		if err != nil {
			return nil, 0, err
		}
	}
	if err := delim(dec, '}'); err != nil {
		return nil, 0, err
	}
	if err := onlySpace(io.MultiReader(dec.Buffered(), r)); err != nil {
		return nil, 0, err
	}
	return e, n, nil
}

// onlySpace reads r to its end: nil when it held only JSON whitespace.
func onlySpace(r io.Reader) error {
	buf := make([]byte, 4096)
	for {
		k, err := r.Read(buf)
		if len(bytes.TrimLeft(buf[:k], " \t\r\n")) > 0 {
			return errors.New("data after the entry")
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// objectsOf reads the objects array (or null) one element at a time,
// each a JSON object handed to obj; n is how many.
func objectsOf(dec *json.Decoder, obj func(raw json.RawMessage, end int64) error) (n int, err error) {
	t, err := dec.Token()
	if err != nil || t == nil {
		return 0, err
	}
	if t != json.Delim('[') {
		return 0, errors.New("objects: want an array")
	}
	for ; dec.More(); n++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return n, fmt.Errorf("objects[%d]: %w", n, err)
		}
		if len(raw) == 0 || raw[0] != '{' {
			return n, fmt.Errorf("objects[%d]: want a JSON object", n)
		}
		if err := obj(raw, dec.InputOffset()); err != nil {
			return n, fmt.Errorf("objects[%d]: %w", n, err)
		}
	}
	return n, delim(dec, ']')
}

// delim reads the delimiter d.
func delim(dec *json.Decoder, d json.Delim) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t != d {
		return fmt.Errorf("want %q, found %v", d, t)
	}
	return nil
}

var entryNameRE = regexp.MustCompile(`^[0-9a-f]{64}\.json$`)

// path is the file of key: its hex digits and ".json".
func (c *Cache) path(key string) string {
	return filepath.Join(c.Dir, strings.TrimPrefix(key, canon.DigestPrefix)+entrySuffix)
}

// ErrMiss reports that no usable entry exists for a key; it wraps the reason.
var ErrMiss = errors.New("render cache miss")

// file is an entry file: the entry's bytes and their MAC under the key.
type file struct {
	Entry json.RawMessage `json:"entry"`
	MAC   string          `json:"mac"`
}

// Get reads the entry for key. The file is read as safefile reads it (a
// regular file, no symbolic link, at most MaxEntryBytes, unchanged across
// the read); its mac must be the MAC of its entry member's exact bytes
// under c.MACKey before anything in the entry is parsed. Every failure is
// a miss: an error wrapping ErrMiss with the reason (absent, unreadable,
// not written with this key, malformed, another key).
func (c *Cache) Get(key string) (*Entry, error) {
	if len(c.MACKey) != KeySize {
		return nil, fmt.Errorf("%w: no render cache key", ErrMiss)
	}
	data, err := safefile.Read(c.path(key), MaxEntryBytes, safefile.Perm{})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: no entry", ErrMiss)
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrMiss, err)
	}
	entry, mac, err := unframed(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMiss, err)
	}
	if !hmac.Equal(mac, []byte(MAC(c.MACKey, entry))) {
		return nil, fmt.Errorf("%w: entry not written with this installation's key", ErrMiss)
	}
	e, err := ParseEntry(entry)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMiss, err)
	}
	if e.Key != key {
		return nil, fmt.Errorf("%w: the entry is for key %s", ErrMiss, e.Key)
	}
	return e, nil
}

// unframed splits an entry file into its entry member's bytes and its
// mac: framed when Put wrote it, else decoded in full.
func unframed(data []byte) (entry, mac []byte, err error) {
	if entry, mac, ok := framed(data); ok {
		return entry, mac, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f file
	if err := dec.Decode(&f); err != nil || dec.More() {
		return nil, nil, errors.New("entry not written with this installation's key")
	}
	return f.Entry, []byte(f.MAC), nil
}

// framedHead starts an entry file as Put writes it.
const framedHead = `{"entry":`

// framedTail is the length of the end of a framed file after its entry
// member: ,"mac":"M"}.
const framedTail = len(`,"mac":"`+MACPrefix+`"}`) + 64

// framedMAC is the end of an entry file as Put writes it.
var framedMAC = regexp.MustCompile(`^,"mac":"(` + MACPrefix + `[0-9a-f]{64})"}$`)

// framed splits an entry file written as Put writes it,
// {"entry":E,"mac":"M"}, into E and M without copying E (about 13 MB at
// 10,000 objects, held once rather than twice while the entry is parsed);
// ok is false for any other form, which Get then decodes in full. E is
// only ever used once its MAC is checked: bytes that are not the entry
// member of a valid file have no valid MAC and fail ParseEntry besides.
func framed(data []byte) (entry, mac []byte, ok bool) {
	tail := framedTail
	data = bytes.TrimRight(data, " \t\r\n")
	if !bytes.HasPrefix(data, []byte(framedHead)) || len(data) < len(framedHead)+tail {
		return nil, nil, false
	}
	m := framedMAC.FindSubmatchIndex(data[len(data)-tail:])
	if m == nil {
		return nil, nil, false
	}
	end := len(data) - tail
	return data[len(framedHead):end], data[end+m[2] : end+m[3]], true
}

// Put writes e with its MAC atomically: a 0600 temporary file in the 0700
// cache directory, synced, then renamed over the entry's name. Readers see
// the old entry, the new one, or none; never a partial one.
func (c *Cache) Put(e *Entry) error {
	if len(c.MACKey) != KeySize {
		return fail.Errorf(fail.Invalid, "render cache: no key to authenticate the entry")
	}
	e.Schema = Schema
	raw, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if _, err := ParseEntry(raw); err != nil {
		return err
	}
	data, err := json.Marshal(file{Entry: raw, MAC: MAC(c.MACKey, raw)})
	if err != nil {
		return err
	}
	if len(data) > MaxEntryBytes {
		return fail.Errorf(fail.Invalid, "render cache: the entry would be %d bytes, more than the cap of %d", len(data), MaxEntryBytes)
	}
	return c.write(e.Key, data)
}

// write stores data as the entry file of key, atomically.
func (c *Cache) write(key string, data []byte) error {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return fail.Errorf(fail.Unavailable, "render cache %q: %w; pass --no-cache to run without it", c.Dir, err)
	}
	if err := os.Chmod(c.Dir, 0o700); err != nil {
		return fail.Errorf(fail.Unavailable, "render cache %q: %w", c.Dir, err)
	}
	f, err := os.CreateTemp(c.Dir, tempPrefix+"*")
	if err != nil {
		return fail.Errorf(fail.Unavailable, "render cache %q: %w; pass --no-cache to run without it", c.Dir, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fail.Errorf(fail.Unavailable, "render cache: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fail.Errorf(fail.Unavailable, "render cache: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fail.Errorf(fail.Unavailable, "render cache: sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fail.Errorf(fail.Unavailable, "render cache: %w", err)
	}
	if err := os.Rename(tmp, c.path(key)); err != nil {
		return fail.Errorf(fail.Unavailable, "render cache: %w", err)
	}
	return nil
}

// Touch marks the entry for key as used now, so that Prune keeps it.
// Failures are ignored: the mark only affects pruning.
func (c *Cache) Touch(key string, now time.Time) {
	_ = os.Chtimes(c.path(key), now, now)
}

// Prune removes the entries (and leftover temporary files) last written or
// used before now-olderThan; olderThan 0 removes every entry. Files that
// are not entries are left alone. It returns how many files it removed; a
// missing directory is an empty cache.
func (c *Cache) Prune(olderThan time.Duration, now time.Time) (int, error) {
	if olderThan < 0 {
		return 0, fail.Errorf(fail.Invalid, "--older-than %s: must not be negative", olderThan)
	}
	ents, err := os.ReadDir(c.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fail.Errorf(fail.Unavailable, "render cache %q: %w", c.Dir, err)
	}
	cutoff := now.Add(-olderThan)
	n := 0
	var errs []error
	for _, d := range ents {
		name := d.Name()
		if !d.Type().IsRegular() || !(entryNameRE.MatchString(name) || strings.HasPrefix(name, tempPrefix)) {
			continue
		}
		info, err := d.Info()
		if err != nil {
			continue // removed meanwhile
		}
		if olderThan > 0 && !info.ModTime().Before(cutoff) {
			continue
		}
		if err := os.Remove(filepath.Join(c.Dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		n++
	}
	if len(errs) > 0 {
		return n, fail.Wrap(fail.Unavailable, fmt.Errorf("render cache %q: %w", c.Dir, errors.Join(errs...)))
	}
	return n, nil
}
