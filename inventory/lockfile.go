package inventory

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// WriteLockFile writes data to path through a temporary file in the same
// directory, so that no reader sees a partial lock. Without replace it
// never replaces an existing file (a hard link fails if path exists), but an
// existing identical lock is success. It reports whether it wrote.
func WriteLockFile(path string, data []byte, replace bool) (bool, error) {
	same := func() (bool, error) {
		old, err := os.ReadFile(path)
		if err != nil {
			return false, fail.Errorf(fail.Invalid, "read existing lock: %w", err)
		}
		if !bytes.Equal(old, data) {
			return false, fail.Errorf(fail.Invalid, "%s exists and differs from the new lock; pass --update to replace it", path)
		}
		return true, nil
	}
	if !replace {
		if _, err := os.Lstat(path); err == nil {
			if ok, err := same(); !ok {
				return false, err
			}
			return false, nil
		}
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+LockFile+".*")
	if err != nil {
		return false, fail.Errorf(fail.Invalid, "write lock: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return false, fail.Errorf(fail.Invalid, "write lock: %w", err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return false, fail.Errorf(fail.Invalid, "write lock: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return false, fail.Errorf(fail.Invalid, "write lock: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return false, fail.Errorf(fail.Invalid, "write lock: %w", err)
	}
	if replace {
		err = os.Rename(tmp.Name(), path)
	} else {
		err = os.Link(tmp.Name(), path)
		if errors.Is(err, fs.ErrExist) {
			// Someone wrote a lock since we looked.
			if ok, err := same(); !ok {
				return false, err
			}
			return false, nil
		}
	}
	if err != nil {
		return false, fail.Errorf(fail.Invalid, "write lock: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // make the new name durable; best effort
		d.Close()
	}
	return true, nil
}
