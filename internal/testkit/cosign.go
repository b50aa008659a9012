package testkit

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// CosignBin is bin/tools/cosign (the pinned build of `make tools`);
// without it the test fails.
func CosignBin(t testing.TB) string {
	t.Helper()
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(root, "bin", "tools", "cosign")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("cosign: %v; run `make tools` (it builds the pinned cosign into bin/tools)", err)
	}
	return p
}

// CosignVerifyAttestation runs `cosign verify-blob-attestation --key pub
// --type typ --signature envelope --insecure-ignore-tlog=true` offline (no
// transparency log, no TUF, every proxy a closed port) on the subject file
// subject, or, when subject starts with "sha256:", on that digest
// (--digest, --digestAlg sha256). It returns cosign's output and exit code.
func CosignVerifyAttestation(t testing.TB, pub, typ, envelope, subject string) (string, int) {
	t.Helper()
	args := []string{"verify-blob-attestation", "--key", pub, "--type", typ, "--signature", envelope, "--insecure-ignore-tlog=true"}
	if d, ok := cutDigest(subject); ok {
		args = append(args, "--digest", d, "--digestAlg", "sha256")
	} else {
		args = append(args, subject)
	}
	cmd := exec.Command(CosignBin(t), args...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+home, "TUF_ROOT="+filepath.Join(home, "tuf"),
		"HTTPS_PROXY=http://127.0.0.1:1", "HTTP_PROXY=http://127.0.0.1:1", "NO_PROXY=", "https_proxy=http://127.0.0.1:1", "http_proxy=http://127.0.0.1:1", "no_proxy=")
	out, errOut, code := Run(t, cmd)
	return out + errOut, code
}

func cutDigest(s string) (string, bool) {
	const p = "sha256:"
	if len(s) == len(p)+64 && s[:len(p)] == p {
		return s[len(p):], true
	}
	return "", false
}

// PublicKeyFile writes key's public key as a PKIX PEM file at path.
func PublicKeyFile(t testing.TB, path string, key ed25519.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	return WriteFile(t, path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644)
}
