//go:build !unix

package ocistage

// openFlags: no named pipes in a directory here.
const openFlags = 0
