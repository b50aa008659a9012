package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlipFirstHexAlwaysChanges: the digest edits of the bad-input row must
// change the lock whatever digit the digest starts with. The old edit
// replaced the first digit with "f", a no-op for one digest in sixteen
// (seed 1796136971122996777 failed `make reliability` that way).
func TestFlipFirstHexAlwaysChanges(t *testing.T) {
	flip := flipFirstHex(`source:\n  digest: sha256:`)
	for _, d := range "0123456789abcdef" {
		in := "source:\n  digest: sha256:" + string(d) + "123\nrender:\n  digest: sha256:" + string(d) + "456\n"
		out := flip(in)
		if out == in {
			t.Fatalf("digest starting with %c: unchanged", d)
		}
		if !strings.HasSuffix(out, "render:\n  digest: sha256:"+string(d)+"456\n") {
			t.Fatalf("digest starting with %c: the render digest changed too: %q", d, out)
		}
		if strings.Count(out, "123") != 1 || len(out) != len(in) {
			t.Fatalf("digest starting with %c: more than one digit changed: %q", d, out)
		}
	}
}

// TestEditFileRefusesNoOp: an edit that leaves the file as it was is a
// broken case, reported as such, never run as "bad input".
func TestEditFileRefusesNoOp(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("count: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := editFile(dir, "f", replaceRE(`count: \d+`, "count: 3"))
	if err == nil || !strings.Contains(err.Error(), "changed nothing") {
		t.Fatalf("no-op edit: err = %v, want 'changed nothing'", err)
	}
	if err := editFile(dir, "f", replaceRE(`count: \d+`, "count: 4")); err != nil {
		t.Fatalf("real edit: %v", err)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "f")); string(data) != "count: 4\n" {
		t.Fatalf("file = %q", data)
	}
}
