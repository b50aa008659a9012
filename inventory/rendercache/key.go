package rendercache

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/safefile"
)

const (
	// KeySize is the length of the MAC key, in bytes.
	KeySize = 32
	// keyFile is the key's file name in its directory.
	keyFile = "render-cache.key"
	// macDomain separates entry MACs from any other use of the key.
	macDomain = "kubectl-ql3/render-cache-mac/v1"
	// MACPrefix starts every entry's mac.
	MACPrefix = "hmac-sha256:"
)

// DefaultKeyPath is $XDG_CONFIG_HOME/kubectl-ql3/render-cache.key
// (os.UserConfigDir): outside the cache directory, so that copying or
// restoring a cache never carries the key along.
func DefaultKeyPath() (string, error) {
	d, err := os.UserConfigDir()
	if err != nil {
		return "", fail.Errorf(fail.Unavailable, "render cache key: no user config directory (%v); set XDG_CONFIG_HOME or HOME, or pass --no-cache", err)
	}
	return filepath.Join(d, "kubectl-ql3", keyFile), nil
}

// LoadKey reads the MAC key at path, creating it on first use: KeySize
// random bytes in a file of mode 0600, in a directory created 0700. The
// file is read with safefile's hardening (absolute path, no symbolic link,
// a regular file, owner-only mode, at most KeySize bytes, identity
// unchanged across the read) and must hold exactly KeySize bytes; its
// directory must not be a symbolic link nor group or world writable (others
// could replace the file). An existing file that fails a check is an
// error, never replaced.
func LoadKey(path string) ([]byte, error) {
	if st, err := os.Lstat(filepath.Dir(path)); err == nil && (!st.IsDir() || st.Mode().Perm()&0o022 != 0) {
		return nil, fail.Errorf(fail.Invalid, "render cache key: %s: not a directory that only its owner can write (mode %v); run chmod go-w on it", filepath.Dir(path), st.Mode())
	}
	key, err := safefile.Read(path, KeySize, safefile.OwnerOnly)
	if errors.Is(err, fs.ErrNotExist) {
		if err = createKey(path); err != nil {
			return nil, err
		}
		key, err = safefile.Read(path, KeySize, safefile.OwnerOnly)
	}
	if err != nil {
		return nil, fail.Errorf(fail.ClassOf(err), "render cache key: %w", err)
	}
	if len(key) != KeySize {
		return nil, fail.Errorf(fail.Invalid, "render cache key: %s: %d bytes, want %d", path, len(key), KeySize)
	}
	return key, nil
}

// createKey writes a new random key to path unless a file is there
// already: the key is written to a temporary file, synced, and linked to
// path, which fails if another process created the key first (that key
// is then the one read).
func createKey(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fail.Errorf(fail.Unavailable, "render cache key: %w", err)
	}
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return fail.Errorf(fail.Unavailable, "render cache key: %w", err)
	}
	f, err := os.CreateTemp(dir, tempPrefix+"*")
	if err != nil {
		return fail.Errorf(fail.Unavailable, "render cache key: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(key)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(tmp, path)
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fail.Errorf(fail.Unavailable, "render cache key: %w", err)
	}
	return nil
}

// MAC is an entry's mac: MACPrefix + hex(HMAC-SHA256(key, macDomain +
// 0x00 + entry)), entry being the entry's bytes exactly as stored.
func MAC(key, entry []byte) string {
	m := newMAC(key)
	m.Write(entry)
	return macOf(m)
}

// newMAC is the HMAC of MAC with the domain written: write the entry's
// bytes, then macOf.
func newMAC(key []byte) hash.Hash {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(macDomain))
	m.Write([]byte{0})
	return m
}

// macOf is the mac of what m (newMAC) was written.
func macOf(m hash.Hash) string { return MACPrefix + hex.EncodeToString(m.Sum(nil)) }
