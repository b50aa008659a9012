package receipts

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// WriteNew writes data into dir as name exactly as Publish writes a
// receipt: to a synced temporary file linked to its name, never replacing
// a file, the directory synced and created if missing. It reports
// replayed when name already holds exactly data; a file there with other
// bytes is fail.Tamper and nothing is written. It is the no-replace writer
// of every other kind of evidence (the fleet's rollout receipt and its
// attestation).
func WriteNew(dir, name string, data []byte) (replayed bool, err error) {
	if err := ensureDir(dir); err != nil {
		return false, err
	}
	path := filepath.Join(dir, name)
	replayed, err = linkNew(dir, path, data)
	var differs *existsError
	switch {
	case errors.As(err, &differs):
		return false, fail.Errorf(fail.Tamper, "%q already exists with different content; nothing was written", path)
	case err != nil:
		return false, fmt.Errorf("write %q: %w", path, err)
	}
	return replayed, nil
}
