package main

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/qinglong/kubectl-ql3/internal/ociarchive"
)

// The image holds exactly the binary (the entrypoint) and LICENSE, runs as
// 65532 and is named by tag and by its manifest digest; what is read back
// is what the blobs' digests vouch for.
func TestImage(t *testing.T) {
	dir := t.TempDir()
	bin, lic, out := filepath.Join(dir, "kubectl-ql3"), filepath.Join(dir, "LICENSE"), filepath.Join(dir, "image.oci.tar")
	for p, body := range map[string]string{bin: "\x7fELF not really", lic: "Apache License"} {
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := run(bin, "arm64", "v1.2.3", lic, out); err != nil {
		t.Fatal(err)
	}
	images, err := ociarchive.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(images) != 2 {
		t.Fatalf("index.json names %d images, want 2 (by tag, by digest)", len(images))
	}
	tag, byDigest := images[0], images[1]
	if tag.Name != "ql3.local/kubectl-ql3:v1.2.3" || byDigest.Name != "ql3.local/kubectl-ql3@"+tag.Digest || byDigest.Digest != tag.Digest {
		t.Errorf("names %q (%s) and %q (%s), want the tag and repository@digest of one manifest", tag.Name, tag.Digest, byDigest.Name, byDigest.Digest)
	}
	if got := slices.Sorted(maps.Keys(tag.Files)); !slices.Equal(got, []string{"LICENSE", "kubectl-ql3"}) {
		t.Errorf("layer holds %v, want only LICENSE and kubectl-ql3 (no shell, nothing else)", got)
	}
	if !bytes.Equal(tag.Files["kubectl-ql3"], []byte("\x7fELF not really")) || string(tag.Files["LICENSE"]) != "Apache License" {
		t.Error("the layer's files are not the given binary and license")
	}
	want := map[string]any{"Entrypoint": []any{"/kubectl-ql3"}, "User": "65532:65532", "Env": []any{"PATH=/"}}
	got := map[string]any{"Entrypoint": tag.Config["Entrypoint"], "User": tag.Config["User"], "Env": tag.Config["Env"]}
	if d := cmp.Diff(want, got); d != "" || tag.Arch != "arm64" {
		t.Errorf("config (-want +got):\n%s\narchitecture %q, want arm64", d, tag.Arch)
	}
}

func TestImageRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, bin, version, out, wantErr string
	}{
		{"no binary", "", "v1.0.0", "x.tar", "-binary is required"},
		{"missing binary", filepath.Join(dir, "nope"), "v1.0.0", filepath.Join(dir, "x.tar"), "-binary: open"},
		{"version without v", filepath.Join(dir, "nope"), "1.0.0", filepath.Join(dir, "x.tar"), `-version "1.0.0": want the tag, with its leading v`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := run(c.bin, "amd64", c.version, "LICENSE", c.out)
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("err %v, want %q", err, c.wantErr)
			}
			if _, err := os.Stat(filepath.Join(dir, "x.tar")); err == nil {
				t.Fatal("an archive was written")
			}
		})
	}
}
