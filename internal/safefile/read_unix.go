//go:build linux || darwin

package safefile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// afterRead, when set (tests only), runs between reading the bytes and
// the final identity checks, so a test can change the file mid-read.
var afterRead func(path string)

// identity is what must not change while a file is read.
type identity struct {
	dev, ino, size uint64
	mode           uint32
	mtime, ctime   syscall.Timespec
}

func identityOf(st *syscall.Stat_t) identity {
	m, c := times(st)
	return identity{dev: uint64(st.Dev), ino: st.Ino, size: uint64(st.Size), mode: uint32(st.Mode), mtime: m, ctime: c}
}

func readFile(path string, limit int64, perm Perm) ([]byte, error) {
	if !filepath.IsAbs(path) {
		return nil, invalidf("%s: the path must be absolute", path)
	}
	var before syscall.Stat_t
	if err := syscall.Lstat(path, &before); err != nil {
		return nil, fail.Wrap(fail.Invalid, &os.PathError{Op: "lstat", Path: path, Err: err})
	}
	if err := checkStat(path, &before, limit, perm); err != nil {
		return nil, err
	}
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, invalidf("%s: a symbolic link; give the path of the file itself", path)
		}
		return nil, fail.Wrap(fail.Invalid, &os.PathError{Op: "open", Path: path, Err: err})
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var opened syscall.Stat_t
	if err := syscall.Fstat(fd, &opened); err != nil {
		return nil, fail.Wrap(fail.Unavailable, &os.PathError{Op: "fstat", Path: path, Err: err})
	}
	if err := checkStat(path, &opened, limit, perm); err != nil {
		return nil, err
	}
	id := identityOf(&before)
	if identityOf(&opened) != id {
		return nil, changed(path)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fail.Wrap(fail.Unavailable, err)
	}
	if int64(len(data)) > limit || uint64(len(data)) != id.size {
		return nil, changed(path)
	}
	if afterRead != nil {
		afterRead(path)
	}
	var after, again syscall.Stat_t
	if err := syscall.Fstat(fd, &after); err != nil {
		return nil, fail.Wrap(fail.Unavailable, &os.PathError{Op: "fstat", Path: path, Err: err})
	}
	if err := syscall.Lstat(path, &again); err != nil {
		return nil, changed(path)
	}
	if identityOf(&after) != id || identityOf(&again) != id {
		return nil, changed(path)
	}
	return data, nil
}

// checkStat applies the type, permission and size rules to one stat.
func checkStat(path string, st *syscall.Stat_t, limit int64, perm Perm) error {
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
	case syscall.S_IFLNK:
		return invalidf("%s: a symbolic link; give the path of the file itself", path)
	default:
		return invalidf("%s: not a regular file", path)
	}
	if mode := uint32(st.Mode) & 0o7777; mode&perm.Deny != 0 {
		return invalidf("%s: mode %04o is %s; run %s on it", path, mode, perm.says, perm.fix)
	}
	if st.Size > limit {
		return invalidf("%s: %d bytes, more than the cap of %d", path, st.Size, limit)
	}
	return nil
}

func changed(path string) error {
	return fail.Errorf(fail.Unavailable, "%s changed while being read; read it again once it is no longer being written", path)
}
