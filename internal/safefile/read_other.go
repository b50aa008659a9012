//go:build !linux && !darwin

package safefile

// readFile refuses where the identity checks are not implemented (Windows
// included: its file mode, inode and change time cannot be checked there,
// and skipping them would be silent).
func readFile(path string, _ int64, _ Perm) ([]byte, error) {
	return nil, invalidf("%s: reading this file is supported on Linux and macOS only: its mode and identity checks cannot be made here; use Linux or macOS", path)
}

// identity is not kept where it cannot be checked.
type identity struct{ size uint64 }

func openFile(path string, _ int64, _ Perm) (*File, error) {
	_, err := readFile(path, 0, Perm{})
	return nil, err
}

func (f *File) unchanged() error { return changed(f.Name()) }

func changed(path string) error {
	return invalidf("%s: reading this file is supported on Linux and macOS only", path)
}
