//go:build unix

package receipts

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// bounded runs f and fails the test if it has not returned within 10 s:
// a read blocked on a named pipe shows as a failure, not a hang.
func bounded(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still blocked after 10s", what)
		return nil
	}
}

// A named pipe where a receipt or its signature is read — by Publish,
// finding the name taken, and by Audit, beside a receipt it was given —
// is refused, invalid input naming it, without blocking on it.
func TestNamedPipeRefused(t *testing.T) {
	dir := t.TempDir()
	r := newReceipt().sealed(t)
	at := filepath.Join(dir, FileName(r))
	if err := syscall.Mkfifo(at, 0o644); err != nil {
		t.Fatal(err)
	}
	err := bounded(t, "Publish onto a named pipe", func() error { _, err := Publish(dir, r, nil, nil); return err })
	if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), at) || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("Publish onto a named pipe: %v (class %v), want invalid naming %s", err, fail.ClassOf(err), at)
	}

	dir = t.TempDir()
	res, err := Publish(dir, r, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sig := res.Path + SignatureSuffix
	if err := syscall.Mkfifo(sig, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, paths := range [][]string{{dir}, {res.Path}} {
		err = bounded(t, "Audit beside a named pipe", func() error { _, err := Audit(paths, AuditOptions{}); return err })
		if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), sig) || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("Audit %v with a named pipe for the signature: %v (class %v), want invalid naming %s", paths, err, fail.ClassOf(err), sig)
		}
	}
}
