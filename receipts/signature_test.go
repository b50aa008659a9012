package receipts

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
)

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeKeyPair(t *testing.T, dir, name string, k ed25519.PrivateKey) (privPath, pubPath string) {
	t.Helper()
	privDER, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	return writePEM(t, dir, name+".key", "PRIVATE KEY", privDER), writePEM(t, dir, name+".pub", "PUBLIC KEY", pubDER)
}

func TestSignAndVerify(t *testing.T) {
	r := newReceipt().sealed(t)
	k := testKey(7)
	data := mustSign(t, r, k)
	if again := mustSign(t, r, k); !bytes.Equal(again, data) {
		t.Fatal("signing is not deterministic")
	}
	s, err := ParseSignature(data)
	if err != nil {
		t.Fatal(err)
	}
	pub := k.Public().(ed25519.PublicKey)
	der, _ := x509.MarshalPKIXPublicKey(pub)
	sum := sha256.Sum256(der)
	if want := "sha256:" + hex.EncodeToString(sum[:]); s.KeyID != want {
		t.Errorf("keyId %q, want %q", s.KeyID, want)
	}
	// The signed message is the documented one, checked with the standard
	// library directly.
	raw, _ := base64.StdEncoding.DecodeString(s.Signature)
	if !ed25519.Verify(pub, []byte("kubectl-ql3/receipt-signature/v1\x00"+r.SelfDigest), raw) {
		t.Fatal("signature is not over the documented message")
	}
	trusted := TrustedKeys{s.KeyID: pub}
	if err := VerifySignature(s, r.SelfDigest, trusted); err != nil {
		t.Fatal(err)
	}

	other := following(r, KindUpgrade, "3.1.0").sealed(t)
	forged := *s
	sigBytes, _ := base64.StdEncoding.DecodeString(s.Signature)
	sigBytes[10] ^= 1
	forged.Signature = base64.StdEncoding.EncodeToString(sigBytes)
	untrusted, _ := ParseSignature(mustSign(t, r, testKey(8)))
	tests := []struct {
		name    string
		sig     *Signature
		digest  string
		wantErr string
	}{
		{"another receipt", s, other.SelfDigest, "is for receipt"},
		{"forged", &forged, r.SelfDigest, "does not verify"},
		{"untrusted key", untrusted, r.SelfDigest, "is not a trusted key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := VerifySignature(tt.sig, tt.digest, trusted)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !fail.Is(err, fail.Tamper) {
				t.Fatalf("got %v, want tamper %q", err, tt.wantErr)
			}
		})
	}
}

func TestParseSignatureStrict(t *testing.T) {
	r := newReceipt().sealed(t)
	good := mustSign(t, r, testKey(7))
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		_ = json.Unmarshal(good, &m)
		f(m)
		b, _ := json.Marshal(m) // keys sorted, ASCII only: canonical
		return b
	}
	tests := []struct {
		name    string
		data    []byte
		wantErr string
	}{
		{"newline", append(bytes.Clone(good), '\n'), "ends with a newline"},
		{"unknown field", edit(func(m map[string]any) { m["note"] = "x" }), `unknown field "note"`},
		{"missing field", edit(func(m map[string]any) { delete(m, "keyId") }), `"keyId": is missing`},
		{"schema", edit(func(m map[string]any) { m["schema"] = "x" }), `"schema"`},
		{"key id", edit(func(m map[string]any) { m["keyId"] = "abc" }), `"keyId"`},
		{"digest", edit(func(m map[string]any) { m["receiptDigest"] = "sha256:00" }), `"receiptDigest"`},
		{"url base64", edit(func(m map[string]any) {
			m["signature"] = strings.NewReplacer("+", "-", "/", "_").Replace(m["signature"].(string)) + "-"
		}), `"signature"`},
		{"short", edit(func(m map[string]any) { m["signature"] = "AAAA" }), `"signature"`},
		{"unpadded", edit(func(m map[string]any) { m["signature"] = strings.TrimRight(m["signature"].(string), "=") }), `"signature"`},
		{"receipt", mustBytes(t, r), `"schema"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSignature(tt.data)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !fail.Is(err, fail.Tamper) {
				t.Fatalf("got %v, want tamper %q", err, tt.wantErr)
			}
		})
	}
}

func TestLoadKeys(t *testing.T) {
	dir := t.TempDir()
	k := testKey(3)
	priv, pub := writeKeyPair(t, dir, "ops", k)
	got, err := LoadSigningKey(priv)
	if err != nil || !got.Equal(k) {
		t.Fatalf("LoadSigningKey: %v", err)
	}
	keys, err := LoadTrustedKeys([]string{pub, pub})
	if err != nil || len(keys) != 1 {
		t.Fatalf("LoadTrustedKeys: %v %v", keys, err)
	}
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecPriv, _ := x509.MarshalPKCS8PrivateKey(ec)
	ecPub, _ := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	two := filepath.Join(dir, "two.pub")
	pubPEM, _ := os.ReadFile(pub)
	_ = os.WriteFile(two, append(bytes.Clone(pubPEM), pubPEM...), 0o600)

	tests := []struct {
		name    string
		load    func() error
		wantErr string
	}{
		{"private key as trusted key", func() error { _, err := LoadTrustedKeys([]string{priv}); return err }, "is a private key"},
		{"public key as signing key", func() error { _, err := LoadSigningKey(pub); return err }, `is not "PRIVATE KEY"`},
		{"ecdsa signing key", func() error {
			_, err := LoadSigningKey(writePEM(t, dir, "ec.key", "PRIVATE KEY", ecPriv))
			return err
		}, "not an Ed25519 key"},
		{"ecdsa trusted key", func() error {
			_, err := LoadTrustedKeys([]string{writePEM(t, dir, "ec.pub", "PUBLIC KEY", ecPub)})
			return err
		}, "not an Ed25519 key"},
		{"missing file", func() error { _, err := LoadSigningKey(filepath.Join(dir, "nope")); return err }, "no such file"},
		{"not pem", func() error { _, err := LoadTrustedKeys([]string{writePEM(t, dir, "x", "X", nil) + "x"}); return err }, "no such file"},
		{"two blocks", func() error { _, err := LoadTrustedKeys([]string{two}); return err }, "more than one PEM block"},
		// The hardened read (internal/safefile): a private key owner-only,
		// a public key not writable by others, no link, no FIFO, bounded.
		{"signing key readable by others", func() error { _, err := LoadSigningKey(chmodCopy(t, priv, "shared.key", 0o644)); return err }, "owner-only"},
		{"trusted key writable by others", func() error { _, err := LoadTrustedKeys([]string{chmodCopy(t, pub, "shared.pub", 0o666)}); return err }, "writable"},
		{"signing key is a symlink", func() error {
			link := filepath.Join(dir, "link.key")
			if err := os.Symlink(priv, link); err != nil {
				t.Fatal(err)
			}
			_, err := LoadSigningKey(link)
			return err
		}, "symbolic link"},
		{"signing key is a named pipe", func() error {
			p := filepath.Join(dir, "fifo.key")
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadSigningKey(p)
			return err
		}, "not a regular file"},
		{"trusted key too large", func() error {
			big := filepath.Join(dir, "big.pub")
			_ = os.WriteFile(big, append(bytes.Clone(pubPEM), bytes.Repeat([]byte("\n"), MaxKeyFileBytes)...), 0o600)
			_, err := LoadTrustedKeys([]string{big})
			return err
		}, "bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.load()
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !fail.Is(err, fail.Invalid) {
				t.Fatalf("got %v, want invalid %q", err, tt.wantErr)
			}
		})
	}
}

// chmodCopy copies src to name beside it with mode (not subject to umask).
func chmodCopy(t *testing.T, src, name string, mode os.FileMode) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	return testkit.WriteFile(t, filepath.Join(filepath.Dir(src), name), data, mode)
}
