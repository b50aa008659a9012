package rendercache

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// LockSchema is every lock entry's schema field.
const LockSchema = "kubectl-ql3/render-cache-lock@v1"

// LockEntry is one kept lock parse: the lock a lock file's bytes parse to,
// as the lock's JSON, so that a command reading an unchanged lock file does
// not parse its YAML again (at 10,000 objects that parse alone holds about
// 30 MB at its peak).
type LockEntry struct {
	Schema string `json:"schema"`
	// Key is the entry's cache key (LockKey); its file is named after it.
	Key string `json:"key"`
	// LockFile is "sha256:" + hex(SHA-256) of the lock file's bytes.
	LockFile string `json:"lockFile"`
	// Lock is the parsed lock as JSON; the reader decodes and checks it.
	Lock json.RawMessage `json:"lock"`
}

// LockKey is the cache key of a lock file's parse: the canonical JSON of
// {"build": build, "lockFile": lockFile, "schema": LockSchema} under
// DomainKey. Its members are not a render key's, so no lock key is a
// render key.
func LockKey(lockFile, build string) (string, error) {
	if !canon.IsDigest(lockFile) || !canon.IsDigest(build) {
		return "", fail.Errorf(fail.Invalid, "render cache lock key: lock file digest %q and build %q must be digests", lockFile, build)
	}
	return canon.DigestOf(DomainKey, map[string]string{"schema": LockSchema, "lockFile": lockFile, "build": build})
}

// GetLock reads the lock entry for key: the file as Get reads it, its MAC
// verified before anything is parsed, then the entry parsed strictly (one
// JSON object, each member once, no unknown member, the schema, the key
// looked up, a lockFile digest and a lock object). Every failure is a
// miss wrapping ErrMiss.
func (c *Cache) GetLock(key string) (*LockEntry, error) {
	raw, err := c.verified(key)
	if err != nil {
		return nil, err
	}
	e, err := parseLockEntry(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrMiss, err)
	case e.Key != key:
		return nil, fmt.Errorf("%w: the entry is for key %s", ErrMiss, e.Key)
	}
	return e, nil
}

// PutLock writes the lock entry e with its MAC, atomically, as Put does.
func (c *Cache) PutLock(e *LockEntry) error {
	if len(c.MACKey) != KeySize {
		return fail.Errorf(fail.Invalid, "render cache: no key to authenticate the entry")
	}
	e.Schema = LockSchema
	raw, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if _, err := parseLockEntry(raw); err != nil {
		return err
	}
	return c.seal(e.Key, raw)
}

// parseLockEntry decodes a lock entry strictly; the error is fail.Invalid.
func parseLockEntry(data []byte) (*LockEntry, error) {
	e := &LockEntry{}
	dec := json.NewDecoder(bytes.NewReader(data))
	err := members(dec, map[string]any{"schema": &e.Schema, "key": &e.Key, "lockFile": &e.LockFile, "lock": &e.Lock})
	if err == nil && len(bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n")) > 0 {
		err = fmt.Errorf("data after the entry")
	}
	switch {
	case err != nil:
		return nil, fail.Errorf(fail.Invalid, "render cache lock entry: %w", err)
	case e.Schema != LockSchema:
		return nil, fail.Errorf(fail.Invalid, "render cache lock entry: schema %q is not %q", e.Schema, LockSchema)
	case !canon.IsDigest(e.Key), !canon.IsDigest(e.LockFile):
		return nil, fail.Errorf(fail.Invalid, "render cache lock entry: key and lockFile must be digests")
	case len(e.Lock) == 0 || e.Lock[0] != '{':
		return nil, fail.Errorf(fail.Invalid, "render cache lock entry: lock: want an object")
	}
	return e, nil
}

// members decodes one JSON object from dec into fields, by member name:
// each member once, none unknown.
func members(dec *json.Decoder, fields map[string]any) error {
	if err := delim(dec, '{'); err != nil {
		return err
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := t.(string)
		f, ok := fields[name]
		switch {
		case seen[name]:
			return fmt.Errorf("member %q twice", name)
		case !ok:
			return fmt.Errorf("json: unknown field %q", name)
		}
		seen[name] = true
		if err := dec.Decode(f); err != nil {
			return err
		}
	}
	return delim(dec, '}')
}
