package keyset

// readFile refuses on Windows: the file mode, inode and change-time checks
// the format requires cannot be made there, and skipping them would be
// silent (docs/keyset.md).
func readFile(path string, _ int64) ([]byte, error) {
	return nil, invalidf("%s: reading a keyset file is not supported on Windows: its mode and identity checks cannot be made; verify it on Linux or macOS", path)
}
