package inventory

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/rendercache"
)

// KeptLockMin is the smallest lock file whose parse the render cache
// keeps: below it the YAML parse costs less than reading an entry (a
// 64 KiB lock is about 700 objects).
const KeptLockMin = 64 << 10

// readLockCached is ReadLock with the lock's parse kept in cache
// (docs/render-cache.md#lock-parses). The lock file's bytes are hashed;
// the lock entry under that digest and the cache's build is used when its
// MAC verifies, it names that digest, and its lock decodes strictly and
// passes every field check ParseLock makes. Otherwise the file is parsed
// and, if it is at least KeptLockMin bytes, the parse is stored (best
// effort: a failure to store costs the next command a parse).
func readLockCached(fsys filesys.FileSystem, dir string, cache *rendercache.Cache) (*Lock, error) {
	data, err := readLockFile(fsys, dir)
	if err != nil {
		return nil, err
	}
	if len(data) < KeptLockMin {
		return parseLockFile(dir, data)
	}
	sum := sha256.Sum256(data)
	file := DigestPrefix + hex.EncodeToString(sum[:])
	key, err := rendercache.LockKey(file, cache.Build)
	if err != nil {
		return parseLockFile(dir, data)
	}
	if e, err := cache.GetLock(key); err == nil && e.LockFile == file {
		if l, err := keptLock(e.Lock); err == nil {
			cache.Touch(key, time.Now())
			return l, nil
		}
	}
	l, err := parseLockFile(dir, data)
	if err != nil {
		return nil, err
	}
	if raw, err := json.Marshal(l); err == nil {
		_ = cache.PutLock(&rendercache.LockEntry{Key: key, LockFile: file, Lock: raw})
	}
	return l, nil
}

// keptLock decodes a kept lock parse: its JSON strictly into a Lock (no
// unknown member, nothing after it), then every field check ParseLock
// makes.
func keptLock(raw []byte) (*Lock, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var l Lock
	if err := dec.Decode(&l); err != nil {
		return nil, fail.Errorf(fail.Invalid, "kept lock: %w", err)
	}
	if len(bytes.TrimLeft(raw[dec.InputOffset():], " \t\r\n")) > 0 {
		return nil, fail.Errorf(fail.Invalid, "kept lock: data after the lock")
	}
	if errs := l.validate(); len(errs) > 0 {
		return nil, lockError("kept lock", errs)
	}
	return &l, nil
}
