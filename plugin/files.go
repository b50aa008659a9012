package plugin

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/safefile"
)

// MaxKeyFileBytes bounds a digest key file (--secret-digest-key-file,
// --token-digest-key-file).
const MaxKeyFileBytes = 4096

// readKeyFile reads the digest key in path (given by flag, which errors
// name) with the keyset file's hardening, owner-only (internal/safefile):
// a regular file, not a symbolic link, no group or world permission, at
// most MaxKeyFileBytes, unchanged while read. Surrounding white space is
// removed; the key must be at least min bytes. Bad files are invalid (2).
func readKeyFile(flag, path string, min int) ([]byte, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "%s %q: %w", flag, path, err)
	}
	data, err := safefile.Read(abs, MaxKeyFileBytes, safefile.OwnerOnly)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	key := bytes.TrimSpace(data)
	if len(key) < min {
		return nil, fail.Errorf(fail.Invalid, "%s %q: key is %d bytes, want at least %d", flag, abs, len(key), min)
	}
	return key, nil
}

// createNew writes data to a new file at path (given by flag, which
// errors name), opened with O_EXCL (never
// replacing a file: exists is the error then), with mode perm and no
// temporary file; a failed write removes the partial file. The new name
// is made durable (the directory is synced, best effort).
func createNew(flag, path string, data []byte, perm os.FileMode, exists string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if errors.Is(err, os.ErrExist) {
		return fail.Errorf(fail.Invalid, "%s", exists)
	}
	if err != nil {
		return fail.Errorf(fail.Invalid, "%s: %w", flag, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return fail.Errorf(fail.Unavailable, "write %s: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
