//go:build unix

// The layout tests include named pipes (fifo_unix_test.go): they run where
// the verifier opens files with O_NONBLOCK (safefile.NonblockFlag).

package stagelayout_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/package/intent"
	"github.com/qinglong/kubectl-ql3/ceremony/package/stagelayout"
	"github.com/qinglong/kubectl-ql3/ceremony/package/stagelayout/stagelayouttest"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

const name = "registry.example.com/qinglong/packages/demo"

func verifier(dir string) *stagelayout.Verifier {
	return &stagelayout.Verifier{Layout: dir, TrustedKeys: []ed25519.PublicKey{stagelayouttest.Key(1).Public().(ed25519.PublicKey)}, Allow: []string{name}}
}

func TestEmptyDigest(t *testing.T) {
	sum := sha256.Sum256([]byte("{}"))
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != stagelayout.EmptyDigest {
		t.Fatalf("EmptyDigest %s, sha256 of {} is %s", stagelayout.EmptyDigest, got)
	}
}

func TestVerifyValid(t *testing.T) {
	s, err := stagelayouttest.Write(t.TempDir(), stagelayouttest.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := verifier(s.Dir).Verify(s.Intent())
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if ev != s.Evidence {
		t.Fatalf("evidence %+v, want %+v", ev, s.Evidence)
	}
	// The five fields are the documented OCI digests, recomputed here from the files.
	fileDigest := func(part string) string {
		data, err := os.ReadFile(s.Blobs[part])
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	for _, c := range []struct{ field, got, want string }{
		{"lockDigest", ev.LockDigest, fileDigest("lock")},
		{"contentDigest", ev.ContentDigest, fileDigest("bundle")},
		{"adapterEvidenceDigest", ev.AdapterEvidenceDigest, fileDigest("config")},
		{"stageReceiptDigest", ev.StageReceiptDigest, fileDigest("receipt")},
		{"stageReference", ev.StageReference, name + "@" + fileDigest("manifest")},
	} {
		if c.got != c.want {
			t.Errorf("%s = %s, want %s", c.field, c.got, c.want)
		}
	}
	// An exact allowlist entry admits it too, and a second trusted key is harmless.
	v := verifier(s.Dir)
	v.Allow = []string{s.Evidence.StageReference}
	v.TrustedKeys = append([]ed25519.PublicKey{stagelayouttest.Key(9).Public().(ed25519.PublicKey)}, v.TrustedKeys...)
	if _, err := v.Verify(s.Intent()); err != nil {
		t.Errorf("exact allowlist entry: %v", err)
	}
}

// Every tamper of the layout, the receipt or the policy maps to its class.
func TestVerifyTamper(t *testing.T) {
	type setup struct {
		spec   stagelayouttest.Spec
		after  func(t *testing.T, s *stagelayouttest.Stage)      // edits the written layout
		intent func(s *stagelayouttest.Stage, in *intent.Intent) // edits the intent
		verify func(v *stagelayout.Verifier)                     // edits the verifier
	}
	write := func(t *testing.T, path string, f func([]byte) []byte) {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, f(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	flip := func(part string) func(t *testing.T, s *stagelayouttest.Stage) {
		return func(t *testing.T, s *stagelayouttest.Stage) {
			write(t, s.Blobs[part], func(b []byte) []byte { b[len(b)/2] ^= 1; return b })
		}
	}
	remove := func(part string) func(t *testing.T, s *stagelayouttest.Stage) {
		return func(t *testing.T, s *stagelayouttest.Stage) {
			if err := os.Remove(s.Blobs[part]); err != nil {
				t.Fatal(err)
			}
		}
	}
	fifo := func(part string) func(t *testing.T, s *stagelayouttest.Stage) {
		return func(t *testing.T, s *stagelayouttest.Stage) { mkfifo(t, s.Blobs[part]) }
	}
	other := canon.DigestBytes("test", []byte("other"))
	otherHex := strings.TrimPrefix(other, "sha256:")
	tests := []struct {
		name    string
		setup   setup
		class   fail.Class
		wantErr string
	}{
		{"bundle bytes changed", setup{after: flip("bundle")}, fail.Unavailable, "hashes to"},
		{"lock bytes changed", setup{after: flip("lock")}, fail.Unavailable, "hashes to"},
		{"config bytes changed", setup{after: flip("config")}, fail.Unavailable, "hashes to"},
		{"manifest bytes changed", setup{after: flip("manifest")}, fail.Unavailable, "hashes to"},
		{"receipt bytes changed", setup{after: flip("receipt")}, fail.Unavailable, "hashes to"},
		{"statement bytes changed", setup{after: flip("statement")}, fail.Unavailable, "hashes to"},
		{"bundle truncated", setup{after: func(t *testing.T, s *stagelayouttest.Stage) {
			write(t, s.Blobs["bundle"], func(b []byte) []byte { return b[:len(b)-1] })
		}}, fail.Unavailable, "bytes its descriptor says"},
		{"bundle blob missing", setup{after: remove("bundle")}, fail.Unavailable, "read blob"},
		{"manifest blob missing", setup{after: remove("manifest")}, fail.Unavailable, "read blob"},
		{"statement blob missing", setup{after: remove("statement")}, fail.Unavailable, "read blob"},
		{"receipt blob missing", setup{after: remove("receipt")}, fail.Unavailable, "read blob"},
		{"no oci-layout", setup{after: func(t *testing.T, s *stagelayouttest.Stage) { os.Remove(filepath.Join(s.Dir, "oci-layout")) }}, fail.Invalid, "has no oci-layout file: it is not an OCI image layout"},
		{"oci-layout version 2", setup{after: func(t *testing.T, s *stagelayouttest.Stage) {
			write(t, filepath.Join(s.Dir, "oci-layout"), func([]byte) []byte { return []byte(`{"imageLayoutVersion":"2.0.0"}`) })
		}}, fail.Invalid, "imageLayoutVersion"},
		{"oci-layout not JSON", setup{after: func(t *testing.T, s *stagelayouttest.Stage) {
			write(t, filepath.Join(s.Dir, "oci-layout"), func([]byte) []byte { return []byte(`1.0.0`) })
		}}, fail.Invalid, "imageLayoutVersion"},
		{"index.json garbage", setup{after: func(t *testing.T, s *stagelayouttest.Stage) {
			write(t, filepath.Join(s.Dir, "index.json"), func([]byte) []byte { return []byte(`{`) })
		}}, fail.Unavailable, "index.json"},
		{"layout directory missing", setup{verify: func(v *stagelayout.Verifier) { v.Layout = filepath.Join(v.Layout, "nope") }}, fail.Invalid, "nope: no such file or directory: give the OCI image layout directory"},
		{"layout is a file", setup{verify: func(v *stagelayout.Verifier) { v.Layout = filepath.Join(v.Layout, "index.json") }}, fail.Invalid, "index.json: not a directory"},
		{"bundle blob is a named pipe", setup{after: fifo("bundle")}, fail.Unavailable, "not a regular file (p"},
		{"manifest blob is a named pipe", setup{after: fifo("manifest")}, fail.Unavailable, "not a regular file"},
		{"statement blob is a named pipe", setup{after: fifo("statement")}, fail.Unavailable, "not a regular file (p"},
		{"index.json is a named pipe", setup{after: func(t *testing.T, s *stagelayouttest.Stage) { mkfifo(t, filepath.Join(s.Dir, "index.json")) }}, fail.Unavailable, "index.json: not a regular file"},
		{"oci-layout is a named pipe", setup{after: func(t *testing.T, s *stagelayouttest.Stage) { mkfifo(t, filepath.Join(s.Dir, "oci-layout")) }}, fail.Unavailable, "oci-layout: not a regular file"},
		{"bundle blob is a directory", setup{after: func(t *testing.T, s *stagelayouttest.Stage) {
			os.Remove(s.Blobs["bundle"])
			if err := os.Mkdir(s.Blobs["bundle"], 0o755); err != nil {
				t.Fatal(err)
			}
		}}, fail.Unavailable, "not a regular file (d"},
		{"blob is a symlink out of the layout", setup{after: func(t *testing.T, s *stagelayouttest.Stage) {
			outside := filepath.Join(t.TempDir(), "bundle")
			data, _ := os.ReadFile(s.Blobs["bundle"])
			os.WriteFile(outside, data, 0o644)
			os.Remove(s.Blobs["bundle"])
			if err := os.Symlink(outside, s.Blobs["bundle"]); err != nil {
				t.Fatal(err)
			}
		}}, fail.Unavailable, "read blob"},
		{"no stage receipt", setup{spec: stagelayouttest.Spec{NoReceipt: true}, intent: func(s *stagelayouttest.Stage, in *intent.Intent) { in.StageReceiptDigest = other }}, fail.Unavailable, "no stage receipt"},
		{"wrong subject", setup{spec: stagelayouttest.Spec{Subject: other}}, fail.Unavailable, "no stage receipt"},
		{"receipt for another lock", setup{spec: stagelayouttest.Spec{LockAnnotation: other}}, fail.Unavailable, "receipts for other locks"},

		{"bad signature", setup{spec: stagelayouttest.Spec{BreakSignature: true}}, fail.Conflict, "signed by none"},
		{"untrusted key", setup{spec: stagelayouttest.Spec{Signer: stagelayouttest.Key(2)}}, fail.Conflict, "signed by none"},
		{"statement names other content", setup{spec: stagelayouttest.Spec{Statement: func(st *stagelayout.Statement) { st.ContentDigest = other }}}, fail.Conflict, "does not describe manifest"},
		{"statement names other reference", setup{spec: stagelayouttest.Spec{Statement: func(st *stagelayout.Statement) { st.StageReference = name + "@" + other }}}, fail.Conflict, "does not describe manifest"},
		{"statement wrong schema", setup{spec: stagelayouttest.Spec{Statement: func(st *stagelayout.Statement) { st.Schema = "x" }}}, fail.Conflict, "schema"},
		{"reference not allowlisted", setup{verify: func(v *stagelayout.Verifier) { v.Allow = []string{"registry.example.com/qinglong/packages/other"} }}, fail.Conflict, "not in the allowlist"},
		{"exact allowlist entry for another digest", setup{verify: func(v *stagelayout.Verifier) { v.Allow = []string{name + "@" + other} }}, fail.Conflict, "not in the allowlist"},
		{"intent names another content", setup{intent: func(s *stagelayouttest.Stage, in *intent.Intent) { in.ContentDigest = other }}, fail.Conflict, "contentDigest: intent " + other},
		{"intent names another lock", setup{intent: func(s *stagelayouttest.Stage, in *intent.Intent) { in.LockDigest = other }}, fail.Conflict, "lockDigest: intent " + other},
		{"intent names another receipt", setup{intent: func(s *stagelayouttest.Stage, in *intent.Intent) { in.StageReceiptDigest = other }}, fail.Conflict, "stageReceiptDigest: intent " + other},
		{"intent names another adapter evidence", setup{intent: func(s *stagelayouttest.Stage, in *intent.Intent) { in.AdapterEvidenceDigest = other }}, fail.Conflict, "adapterEvidenceDigest"},
		{"intent names a manifest not in the layout", setup{intent: func(s *stagelayouttest.Stage, in *intent.Intent) { in.StageReference = name + "@sha256:" + otherHex }}, fail.Unavailable, "read blob"},
		{"reference names a layer, not a manifest", setup{intent: func(s *stagelayouttest.Stage, in *intent.Intent) {
			in.StageReference = name + "@" + s.Evidence.ContentDigest
		}}, fail.Conflict, "not an OCI image manifest"},
		{"reference names the receipt", setup{intent: func(s *stagelayouttest.Stage, in *intent.Intent) { in.StageReference = name + "@" + s.ReceiptDigest }}, fail.Conflict, "not a package stage"},

		{"invalid intent", setup{intent: func(s *stagelayouttest.Stage, in *intent.Intent) { in.Generation = 0 }}, fail.Invalid, "generation"},
		{"no trusted key", setup{verify: func(v *stagelayout.Verifier) { v.TrustedKeys = nil }}, fail.Invalid, "trusted key"},
		{"empty allowlist", setup{verify: func(v *stagelayout.Verifier) { v.Allow = nil }}, fail.Invalid, "allowlist is empty"},
		{"malformed allowlist entry", setup{verify: func(v *stagelayout.Verifier) { v.Allow = []string{"Not A Name"} }}, fail.Invalid, "--allow-ref"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := stagelayouttest.Write(t.TempDir(), tt.setup.spec)
			if err != nil {
				t.Fatal(err)
			}
			if tt.setup.after != nil {
				tt.setup.after(t, s)
			}
			in := s.Intent()
			if tt.setup.intent != nil {
				tt.setup.intent(s, &in)
			}
			v := verifier(s.Dir)
			if tt.setup.verify != nil {
				tt.setup.verify(v)
			}
			_, err = v.Verify(in)
			if err == nil {
				t.Fatalf("Verify accepted it; want %v", tt.class)
			}
			if got := fail.ClassOf(err); got != tt.class {
				t.Errorf("class %v, want %v: %v", got, tt.class, err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not contain %q", err, tt.wantErr)
			}
		})
	}
}

// Two receipts for one manifest and lock: the intent's names the one;
// without a match the verifier refuses to choose.
func TestVerifyTwoReceipts(t *testing.T) {
	dir := t.TempDir()
	first, err := stagelayouttest.Write(dir, stagelayouttest.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	second, err := stagelayouttest.Write(dir, stagelayouttest.Spec{Signer: stagelayouttest.Key(3)})
	if err != nil {
		t.Fatal(err)
	}
	if first.ReceiptDigest == second.ReceiptDigest {
		t.Fatal("two signers wrote one receipt")
	}
	// The producer adds to an existing layout: one manifest, both receipts.
	var index stagelayout.Index
	data, _ := os.ReadFile(filepath.Join(dir, "index.json"))
	if err := json.Unmarshal(data, &index); err != nil || len(index.Manifests) != 3 {
		t.Fatalf("index.json lists %d descriptors (%v), want the manifest and two receipts:\n%s", len(index.Manifests), err, data)
	}
	v := verifier(dir)
	v.TrustedKeys = append(v.TrustedKeys, stagelayouttest.Key(3).Public().(ed25519.PublicKey))
	for _, s := range []*stagelayouttest.Stage{first, second} {
		ev, err := v.Verify(s.Intent())
		if err != nil || ev.StageReceiptDigest != s.ReceiptDigest {
			t.Errorf("receipt %s: %+v %v", s.ReceiptDigest, ev, err)
		}
	}
	in := first.Intent()
	in.StageReceiptDigest = canon.DigestBytes("test", []byte("neither"))
	if _, err := v.Verify(in); !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), "2 stage receipts") {
		t.Errorf("ambiguous receipts: %v", err)
	}
}

func TestParsePublicKey(t *testing.T) {
	good := stagelayouttest.PublicKeyPEM(stagelayouttest.Key(1))
	k, err := stagelayout.ParsePublicKey("k.pem", good)
	if err != nil || !k.Equal(stagelayouttest.Key(1).Public()) {
		t.Fatalf("ParsePublicKey: %v", err)
	}
	for name, data := range map[string][]byte{
		"empty":          nil,
		"private key":    []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"),
		"two keys":       append(append([]byte{}, good...), good...),
		"garbage DER":    []byte("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"),
		"not PEM at all": []byte("ssh-ed25519 AAAA"),
	} {
		if _, err := stagelayout.ParsePublicKey("k.pem", data); !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "k.pem") {
			t.Errorf("%s: %v, want invalid naming the file", name, err)
		}
	}
}

func TestFindStage(t *testing.T) {
	s, err := stagelayouttest.Write(t.TempDir(), stagelayouttest.Spec{})
	if err != nil {
		t.Fatal(err)
	}
	v := &stagelayout.Verifier{Layout: s.Dir, TrustedKeys: []ed25519.PublicKey{stagelayouttest.Key(1).Public().(ed25519.PublicKey)}, Allow: []string{"registry.example.com/qinglong/packages/demo"}}
	got, err := v.FindStage(s.Evidence.LockDigest)
	if err != nil || got != s.ManifestDigest {
		t.Fatalf("FindStage: %q %v, want %s", got, err, s.ManifestDigest)
	}
	if _, err := v.FindStage(s.Evidence.ContentDigest); !fail.Is(err, fail.Unavailable) {
		t.Fatalf("another lock: %v, want unavailable", err)
	}
}

// TestIndexDescriptorArtifactType pins docs/package-pointer.md: the stage
// receipt's artifactType is required on the manifest (hashed, verified);
// its index.json descriptor may repeat it or leave it out, and a
// descriptor naming another artifactType is skipped.
func TestIndexDescriptorArtifactType(t *testing.T) {
	for _, tt := range []struct {
		name    string
		set     func(d map[string]any)
		wantErr string
	}{
		{"repeated", func(d map[string]any) {}, ""},
		{"left out", func(d map[string]any) { delete(d, "artifactType") }, ""},
		{"another type", func(d map[string]any) { d["artifactType"] = "application/vnd.example.other" }, "lists no stage receipt"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := stagelayouttest.Write(t.TempDir(), stagelayouttest.Spec{})
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(s.Dir, "index.json")
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			var idx map[string]any
			if err := json.Unmarshal(data, &idx); err != nil {
				t.Fatal(err)
			}
			found := 0
			for _, m := range idx["manifests"].([]any) {
				d := m.(map[string]any)
				if d["artifactType"] == stagelayout.ArtifactTypeReceipt {
					tt.set(d)
					found++
				}
			}
			if found != 1 {
				t.Fatalf("the written index lists %d receipt descriptors with the artifactType, want 1", found)
			}
			if data, err = json.Marshal(idx); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = verifier(s.Dir).Verify(s.Intent())
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Verify: %v, want %q", err, tt.wantErr)
			}
		})
	}
}
