package stagelayout_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/opencontainers/go-digest"

	"github.com/qinglong/kubectl-ql3/ceremony/package/stagelayout"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// patterned is n bytes of a repeating pattern, generated as read: a large
// bundle that no test holds in memory.
type patterned struct{ n, off int64 }

func (p *patterned) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	b = b[:min(int64(len(b)), p.n-p.off)]
	for i := range b {
		b[i] = byte((p.off + int64(i)) % 251)
	}
	p.off += int64(len(b))
	return len(b), nil
}

// The bundle is streamed into the layout, hashed while copied: staging a
// 64 MiB bundle allocates far less than the bundle (measured by the
// runtime's allocation counter, not by time), and the blob's descriptor
// is the SHA-256 and size of exactly those bytes, computed independently.
func TestWritePackageStreamsTheBundle(t *testing.T) {
	const size = 64 << 20
	want, err := digest.Canonical.FromReader(&patterned{n: size})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s, err := stagelayout.WritePackage(dir, stagelayout.Package{Name: "registry.example.com/demo", Evidence: []byte(`{}`), Lock: []byte(`{}`), Bundle: &patterned{n: size}})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if s.Bundle.Digest != want || s.Bundle.Size != size {
		t.Fatalf("bundle descriptor %s %d, want %s %d", s.Bundle.Digest, s.Bundle.Size, want, size)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/16 {
		t.Fatalf("staging a %d-byte bundle allocated %d bytes: it is held in memory, not streamed", size, alloc)
	}
	fi, err := os.Stat(filepath.Join(dir, "blobs", "sha256", want.Encoded()))
	if err != nil || fi.Size() != size {
		t.Fatalf("bundle blob: %v %v", fi, err)
	}
}

// An empty bundle, or one whose read fails, is invalid input, and leaves
// no blob or temporary file behind.
func TestWritePackageBundleErrors(t *testing.T) {
	for name, r := range map[string]io.Reader{
		"empty":       strings.NewReader(""),
		"read failed": io.MultiReader(strings.NewReader("some"), iotest.ErrReader(errors.New("disk gone"))),
	} {
		dir := t.TempDir()
		_, err := stagelayout.WritePackage(dir, stagelayout.Package{Name: "registry.example.com/demo", Evidence: []byte(`{}`), Lock: []byte(`{}`), Bundle: r})
		if !fail.Is(err, fail.Invalid) {
			t.Errorf("%s: %v, want invalid input", name, err)
		}
		blobs, _ := os.ReadDir(filepath.Join(dir, "blobs", "sha256"))
		if len(blobs) != 0 {
			t.Errorf("%s: left %d files in blobs/sha256", name, len(blobs))
		}
	}
}
