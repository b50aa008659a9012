package safefile

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// ErrNotRegular is on the chain of OpenRegular's and ReadRegular's error
// for a path that is not a regular file (a named pipe, a device, a
// socket, a directory).
var ErrNotRegular = errors.New("not a regular file")

// OpenRegular opens path for reading when it is a regular file (symbolic
// links followed): a named pipe or a device would block the reader or
// never end, so it is refused (fail.Invalid) — the open itself does not
// block on a pipe (NonblockFlag). Errors name the path and keep the
// open's error on their chain (errors.Is(err, fs.ErrNotExist)).
func OpenRegular(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|NonblockFlag, 0)
	if err != nil {
		return nil, fail.Wrap(fail.Invalid, err) // an *os.PathError: it names the path
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, fi.Mode().Type())
	}
	if err != nil {
		f.Close()
		return nil, fail.Wrap(fail.Invalid, err)
	}
	return f, nil
}

// ReadRegular reads path, a regular file (OpenRegular), of at most limit
// bytes: a longer file is refused (fail.Invalid) naming the path and the
// cap, after reading no more than limit+1 bytes. It is the one read of a
// file whose path a user gives (a flag, a directory scanned) where the
// keyset's checks (Read) are not asked: a named pipe put in its place
// neither blocks the open nor the read.
func ReadRegular(path string, limit int64) ([]byte, error) {
	if limit <= 0 {
		return nil, fail.Errorf(fail.Invalid, "%s: size cap %d: want a positive number of bytes", path, limit)
	}
	f, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := readCapped(f, limit)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fail.Errorf(fail.Invalid, "%s: more than the cap of %d bytes", path, limit)
	}
	return data, nil
}

// readCapped reads r to its end, at most limit+1 bytes (one more than a
// reader allows, so that it can tell a file over the cap); a failed read
// is fail.Unavailable.
func readCapped(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fail.Wrap(fail.Unavailable, err)
	}
	return data, nil
}
