//go:build unix

package stagelayout_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qinglong/kubectl-ql3/ceremony/package/stagelayout"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// mkfifo replaces path by a named pipe that nobody writes to: reading it
// blocks forever unless the reader refuses it first.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A named pipe in place of index.json of a layout being written to is
// refused (unavailable, naming it) instead of holding the writer forever;
// the bound fails the test, it is not waited out.
func TestWritePackageIndexFIFO(t *testing.T) {
	dir := t.TempDir()
	pkg := func() stagelayout.Package {
		return stagelayout.Package{Name: "registry.example.com/demo", Evidence: []byte(`{}`), Lock: []byte(`{}`), Bundle: strings.NewReader("bundle")}
	}
	if _, err := stagelayout.WritePackage(dir, pkg()); err != nil {
		t.Fatal(err)
	}
	index := filepath.Join(dir, "index.json")
	mkfifo(t, index)
	done := make(chan error, 1)
	go func() { _, err := stagelayout.WritePackage(dir, pkg()); done <- err }()
	select {
	case err := <-done:
		if !fail.Is(err, fail.Unavailable) || !strings.Contains(err.Error(), index) || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("index.json a named pipe: %v (class %v), want unavailable naming %s", err, fail.ClassOf(err), index)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WritePackage still blocked on the named pipe index.json after 10s")
	}
}
