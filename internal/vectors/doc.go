// Package vectors runs the conformance vectors of testdata/vectors
// (docs/vectors.md) against the project's code. It holds only tests: every
// expected digest of a vector is recomputed a second way, from the docs'
// procedure (RFC 8785 by github.com/gowebpki/jcs, SHA-256 with the domain
// separation of docs/digests.md), and compared with both the vector file
// and the code's value. Only tests use it (internal/arch: test machinery
// never ships).
package vectors
