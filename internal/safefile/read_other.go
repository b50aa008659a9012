//go:build !linux && !darwin

package safefile

// readFile refuses where the identity checks are not implemented (Windows
// included: its file mode, inode and change time cannot be checked there,
// and skipping them would be silent).
func readFile(path string, limit int64, perm Perm) ([]byte, error) {
	_, err := openFile(path, limit, perm)
	return nil, err
}

// identity is not kept where it cannot be checked.
type identity struct{ size uint64 }

// openFile refuses, as readFile does: no File is ever made here.
func openFile(path string, _ int64, _ Perm) (*File, error) {
	return nil, invalidf("%s: reading this file is supported on Linux and macOS only: its mode and identity checks cannot be made here; use Linux or macOS", path)
}

// unchanged is never reached: openFile makes no File.
func (f *File) unchanged() error {
	return invalidf("%s: reading this file is supported on Linux and macOS only", f.Name())
}
