//go:build !unix

package stagelayout

// openFlags: no named pipes in a directory here.
const openFlags = 0
