// Package safefile reads a small local file that decides what kubectl-ql3
// trusts (a keyset, a digest key) so that what was checked is what was
// read: the path is absolute and names a regular file, not a symbolic
// link, FIFO or device; its permission bits grant nothing a Perm denies;
// it is at most a size cap long; and its identity (device, inode, size,
// mode, modification and change time) is the same before, during and after
// the read (docs/keyset.md, "Reading a keyset file").
//
// Bad paths, types, modes and sizes are fail.Invalid; a file that changed
// while being read is fail.Unavailable (read it again). Errors name the
// path; callers prefix what the file is (a flag, "keyset:"). Only Linux and
// macOS can make these checks; elsewhere Read refuses with fail.Invalid
// rather than skip them.
package safefile

import (
	"os"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// Perm is a rule on a file's permission bits: no bit of Deny may be set.
type Perm struct {
	// Deny are the permission bits the file must not have.
	Deny uint32
	// says is what a denied mode does, fix how to repair it.
	says, fix string
}

var (
	// NotShared refuses group- or world-writable files: for files anyone
	// may read but only the owner may change (a keyset of public keys).
	NotShared = Perm{Deny: 0o022, says: "group or world writable", fix: "chmod go-w"}
	// OwnerOnly refuses any group or world permission: for secrets (a
	// digest key), which only the owner may read.
	OwnerOnly = Perm{Deny: 0o077, says: "readable or writable by group or others; a key file must be owner-only", fix: "chmod go-rwx"}
)

// Read reads path under perm, at most limit bytes (limit must be positive).
func Read(path string, limit int64, perm Perm) ([]byte, error) {
	if limit <= 0 {
		return nil, fail.Errorf(fail.Invalid, "%s: size cap %d: want a positive number of bytes", path, limit)
	}
	return readFile(path, limit, perm)
}

// File is a file opened as Read opens it, for a reader that reads it in
// parts (a large file not held in memory at once). Whoever reads it
// calls Unchanged once the parts it checks are read, as Read checks the
// identity after its read; parts read again later must be checked again
// by their reader (a digest kept from the first read).
type File struct {
	*os.File
	id identity
}

// Open opens path as Read reads it: the same path, type, permission, size
// and identity checks, the file left open for the caller to read and
// close.
func Open(path string, limit int64, perm Perm) (*File, error) {
	if limit <= 0 {
		return nil, fail.Errorf(fail.Invalid, "%s: size cap %d: want a positive number of bytes", path, limit)
	}
	return openFile(path, limit, perm)
}

// Unchanged is nil when the open file and its path still have the identity
// (device, inode, size, mode, modification and change time) they had when
// opened, and fail.Unavailable naming the path when not.
func (f *File) Unchanged() error { return f.unchanged() }

// Size is the file's size when it was opened.
func (f *File) Size() int64 { return int64(f.id.size) }

func invalidf(format string, args ...any) error {
	return fail.Errorf(fail.Invalid, format, args...)
}
