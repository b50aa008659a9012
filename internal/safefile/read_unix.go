//go:build linux || darwin

package safefile

import (
	"errors"
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
	f, err := openFile(path, limit, perm)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := readCapped(f, limit)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit || uint64(len(data)) != f.id.size {
		return nil, changed(path)
	}
	if afterRead != nil {
		afterRead(path)
	}
	if err := f.Unchanged(); err != nil {
		return nil, err
	}
	return data, nil
}

// openFile opens path as Read reads it: absolute, a regular file under
// perm and limit, not a symbolic link, its identity the same at the lstat
// before the open and the fstat after.
func openFile(path string, limit int64, perm Perm) (*File, error) {
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
	f := &File{File: os.NewFile(uintptr(fd), path), id: identityOf(&before)}
	var opened syscall.Stat_t
	if err := syscall.Fstat(fd, &opened); err != nil {
		f.Close()
		return nil, fail.Wrap(fail.Unavailable, &os.PathError{Op: "fstat", Path: path, Err: err})
	}
	if err := checkStat(path, &opened, limit, perm); err != nil {
		f.Close()
		return nil, err
	}
	if identityOf(&opened) != f.id {
		f.Close()
		return nil, changed(path)
	}
	return f, nil
}

// unchanged is nil when the open file and the path still have the
// identity they had when opened.
func (f *File) unchanged() error {
	fi, err := f.Stat() // not Fd(), which would set the descriptor blocking
	if err != nil {
		return fail.Wrap(fail.Unavailable, err)
	}
	after, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return changed(f.Name())
	}
	var again syscall.Stat_t
	if err := syscall.Lstat(f.Name(), &again); err != nil {
		return changed(f.Name())
	}
	if identityOf(after) != f.id || identityOf(&again) != f.id {
		return changed(f.Name())
	}
	return nil
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
