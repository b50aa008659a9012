package plugin

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

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
