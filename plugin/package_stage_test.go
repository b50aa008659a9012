package plugin_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/package/intent"
	"github.com/qinglong/kubectl-ql3/ceremony/package/pointer"
	"github.com/qinglong/kubectl-ql3/ceremony/package/stagelayout"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
	"github.com/qinglong/kubectl-ql3/plugin"
)

// writeKeyPair writes a fresh Ed25519 key as the files a user makes with
// openssl genpkey / openssl pkey -pubout: the private key owner-only.
func writeKeyPair(t *testing.T, dir string) (priv, pub string) {
	t.Helper()
	pk, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	pubDER, _ := x509.MarshalPKIXPublicKey(pk)
	priv, pub = filepath.Join(dir, "stage-key.pem"), filepath.Join(dir, "stage-key.pub.pem")
	if err := os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	return priv, pub
}

// The package journey with the tool alone (#23 part 3): stage a lock and a
// bundle with `package stage`, then intent -> activate -> inspect against
// the real API server, exactly as docs/guide-package-activation.md shows it.
func TestCLIPackageStageJourney(t *testing.T) {
	ns := cp.Namespace(t)
	dir := t.TempDir()
	priv, pub := writeKeyPair(t, dir)
	lock, bundle, layout := filepath.Join(dir, "package.lock.json"), filepath.Join(dir, "bundle.tar.gz"), filepath.Join(dir, "stage")
	os.WriteFile(lock, []byte(`{"package":"weather-tools","version":"2.0.0"}`), 0o644)
	os.WriteFile(bundle, []byte("\x1f\x8b not really a tarball: only hashed"), 0o644)

	out := mustRun(t, nil, "package", "stage", "--layout", layout, "--name", pkgRepo, "--lock", lock, "--bundle", bundle, "--signing-key", priv, "-o", "json")
	var rep plugin.StagedReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("stage -o json: %v\n%s", err, out)
	}
	if !strings.HasPrefix(rep.Evidence.StageReference, pkgRepo+"@sha256:") || rep.Evidence.StageReceiptDigest == "" {
		t.Fatalf("stage evidence: %+v", rep.Evidence)
	}
	// Staging again is idempotent: Ed25519 signs deterministically, so
	// the same receipt, and index.json lists it once.
	again := mustRun(t, nil, "package", "stage", "--layout", layout, "--name", pkgRepo, "--lock", lock, "--bundle", bundle, "--signing-key", priv, "-o", "json")
	if again != out {
		t.Fatalf("second stage differs:\n%s\n%s", out, again)
	}
	var index stagelayout.Index
	data, _ := os.ReadFile(filepath.Join(layout, "index.json"))
	if err := json.Unmarshal(data, &index); err != nil || len(index.Manifests) != 3 || index.Manifests[2].ArtifactType != stagelayout.ArtifactTypeAttestation {
		t.Fatalf("index.json: %v, %+v, want the manifest, its receipt and its attestation", err, index.Manifests)
	}
	// cosign verifies the stage attestation with the stage's public key
	// against the very bundle and lock files staged.
	var att stagelayout.Manifest
	data, _ = os.ReadFile(filepath.Join(layout, "blobs", "sha256", index.Manifests[2].Digest.Encoded()))
	if err := json.Unmarshal(data, &att); err != nil || len(att.Layers) != 1 {
		t.Fatalf("attestation manifest: %v %+v", err, att)
	}
	env := filepath.Join(layout, "blobs", "sha256", att.Layers[0].Digest.Encoded())
	for _, f := range []string{bundle, lock} {
		if out, code := testkit.CosignVerifyAttestation(t, pub, stagelayout.PredicateType, env, f); code != 0 || !strings.Contains(out, "Verified OK") {
			t.Fatalf("cosign refused the stage attestation for %s: exit %d\n%s", f, code, out)
		}
	}

	args := []string{"--layout", layout, "--trusted-key", pub, "--allow-ref", pkgRepo}
	out = mustRun(t, nil, append([]string{"package", "intent", "--lock", lock, "--project", "demo", "--package", "weather-tools", "-n", ns}, args...)...)
	in, err := intent.Parse([]byte(out))
	if err != nil || in.Evidence() != rep.Evidence {
		t.Fatalf("intent: %v: evidence %+v, staged %+v", err, in.Evidence(), rep.Evidence)
	}
	file := filepath.Join(dir, "intent.json")
	os.WriteFile(file, []byte(out), 0o644)
	mustRun(t, nil, append([]string{"package", "verify-stage", "--intent", file}, args...)...)
	out = mustRun(t, nil, append([]string{"package", "activate", "--intent", file, "-o", "json"}, args...)...)
	var res pointer.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Action != pointer.Created {
		t.Fatalf("activate: %v\n%s", err, out)
	}
	if out := mustRun(t, nil, append([]string{"package", "inspect", "--intent", file, "-o", "jsonpath={.state}"}, args...)...); out != "active" {
		t.Fatalf("inspect: %q", out)
	}

	// A key that is not the signer's proves nothing: verify-stage refuses.
	_, otherPub := writeKeyPair(t, t.TempDir())
	_, stderr, code := run(t, nil, "package", "verify-stage", "--intent", file, "--layout", layout, "--trusted-key", otherPub, "--allow-ref", pkgRepo)
	if code != fail.Conflict.ExitCode() {
		t.Fatalf("verify-stage with another key: exit %d, want %d: %s", code, fail.Conflict.ExitCode(), stderr)
	}
}

// Bad input to package stage is refused before anything is written.
func TestCLIPackageStageBadInput(t *testing.T) {
	dir := t.TempDir()
	priv, _ := writeKeyPair(t, dir)
	lock, bundle, empty := filepath.Join(dir, "lock.json"), filepath.Join(dir, "b.tgz"), filepath.Join(dir, "empty")
	os.WriteFile(lock, []byte(`{}`), 0o644)
	os.WriteFile(bundle, []byte("b"), 0o644)
	os.WriteFile(empty, nil, 0o644)
	notLayout := filepath.Join(dir, "notlayout")
	os.MkdirAll(notLayout, 0o755)
	os.WriteFile(filepath.Join(notLayout, "x"), []byte("x"), 0o644)
	world := filepath.Join(dir, "world.pem")
	keyBytes, _ := os.ReadFile(priv)
	os.WriteFile(world, keyBytes, 0o644)
	os.Chmod(world, 0o644)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"bad name", []string{"--name", "Bad Name"}, "is not an OCI repository name"},
		{"empty lock", []string{"--lock", empty}, "must not be empty"},
		{"missing bundle", []string{"--bundle", filepath.Join(dir, "nope")}, "--bundle"},
		{"empty bundle", []string{"--bundle", empty}, "the bundle must not be empty"},
		{"a directory as the bundle", []string{"--bundle", notLayout}, "not a regular file"},
		{"not a layout", []string{"--layout", notLayout}, "is not an OCI layout"},
		{"a shared key file", []string{"--signing-key", world}, "--signing-key"},
	} {
		layout := filepath.Join(dir, "layout-"+strings.ReplaceAll(c.name, " ", "-"))
		base := map[string]string{"--layout": layout, "--name": pkgRepo, "--lock": lock, "--bundle": bundle, "--signing-key": priv}
		for i := 0; i < len(c.args); i += 2 {
			base[c.args[i]] = c.args[i+1]
		}
		args := []string{"package", "stage"}
		for k, v := range base {
			args = append(args, k, v)
		}
		_, stderr, code := run(t, nil, args...)
		if code != fail.Invalid.ExitCode() || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, want %d with %q: %s", c.name, code, fail.Invalid.ExitCode(), c.want, stderr)
		}
		if _, err := os.Stat(layout); c.name != "not a layout" && err == nil {
			t.Errorf("%s: %s was created", c.name, layout)
		}
	}
}
