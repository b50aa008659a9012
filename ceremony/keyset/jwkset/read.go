package jwkset

import (
	"fmt"

	"github.com/qinglong/kubectl-ql3/internal/safefile"
)

// ReadFile reads a keyset (or JWK) file safely (docs/keyset.md, "Reading
// a keyset file"): path must be absolute and name a regular file — not a
// symbolic link — that is not group or world writable, at most maxBytes
// long (0: DefaultMaxBytes; never above HardMaxBytes), whose identity
// (device, inode, size, modification and change time) is the same before,
// during and after the read (internal/safefile). Bad paths, modes and
// sizes are fail.Invalid; a file that changed while being read is
// fail.Unavailable (read it again).
//
// Only Linux and macOS can make these checks; elsewhere ReadFile refuses
// with fail.Invalid rather than skip them.
func ReadFile(path string, maxBytes int64) ([]byte, error) {
	limit, err := checkLimit(maxBytes)
	if err != nil {
		return nil, err
	}
	data, err := safefile.Read(path, limit, safefile.NotShared)
	if err != nil {
		return nil, fmt.Errorf("keyset: %w", err)
	}
	return data, nil
}

// checkLimit resolves a caller's size cap.
func checkLimit(maxBytes int64) (int64, error) {
	switch {
	case maxBytes == 0:
		return DefaultMaxBytes, nil
	case maxBytes < 0 || maxBytes > HardMaxBytes:
		return 0, invalidf("size cap %d: want 1 to %d bytes", maxBytes, HardMaxBytes)
	}
	return maxBytes, nil
}
