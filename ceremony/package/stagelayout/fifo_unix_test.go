//go:build unix

package stagelayout_test

import (
	"os"
	"syscall"
	"testing"
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
