package jwkset

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

func pkixPEM(t *testing.T, pub any) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func sshLine(t *testing.T, pub any) []byte {
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return append(bytes.TrimSuffix(ssh.MarshalAuthorizedKey(k), []byte("\n")), " ops@laptop\n"...)
}

// A key file turns into the JWK the keyset format defines, whichever way
// the user holds it; the Ed25519 value is RFC 8032 §7.1 TEST 1's public
// key, the one docs/keyset.md's example shows.
func TestFromPublicKeyFile(t *testing.T) {
	seed, _ := hex.DecodeString("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
	ed := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rs, _ := rsa.GenerateKey(rand.Reader, 2048)
	const rfc8032X = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
	for _, c := range []struct {
		name string
		data []byte
		kty  string
	}{
		{"Ed25519 PKIX PEM", pkixPEM(t, ed), KtyOKP},
		{"Ed25519 OpenSSH", sshLine(t, ed), KtyOKP},
		{"P-256 PKIX PEM", pkixPEM(t, &ec.PublicKey), KtyEC},
		{"P-256 OpenSSH", sshLine(t, &ec.PublicKey), KtyEC},
		{"RSA PKIX PEM", pkixPEM(t, &rs.PublicKey), KtyRSA},
		{"RSA PKCS#1 PEM", pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&rs.PublicKey)}), KtyRSA},
		{"RSA OpenSSH", sshLine(t, &rs.PublicKey), KtyRSA},
	} {
		pub, err := ParsePublicKey("f", c.data)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		j, err := FromPublicKey("key", pub, "")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if j.Kty != c.kty || j.Kid != j.Thumbprint() || j.Use != "sig" {
			t.Errorf("%s: %+v", c.name, j)
		}
		if c.kty == KtyOKP && j.X != rfc8032X {
			t.Errorf("%s: x %q, want RFC 8032's %q", c.name, j.X, rfc8032X)
		}
		// The JWK reads back through the format's own strict parser.
		data, _ := json.Marshal(j)
		if back, err := ParseJWK(data); err != nil || back != j {
			t.Errorf("%s: ParseJWK(%s) = %+v, %v", c.name, data, back, err)
		}
	}
	j1, _ := FromPublicKey("k", ed, "ops-2026-07")
	k, err := Initial([]JWK{j1})
	if err != nil || k.Generation != 1 || len(k.RevokedKids) != 0 {
		t.Fatalf("Initial: %+v %v", k, err)
	}
	if _, err := Initial([]JWK{j1, j1}); err == nil {
		t.Error("Initial accepted one key twice")
	}
}

func TestParsePublicKeyRefuses(t *testing.T) {
	_, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(edPriv)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	edPub := edPriv.Public()
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"a private key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), "never a private key"},
		{"an OpenSSH private key", []byte("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEA\n-----END OPENSSH PRIVATE KEY-----\n"), "never a private key"},
		{"two PEM blocks", append(pkixPEM(t, edPub), pkixPEM(t, edPub)...), "more than one PEM block"},
		{"two OpenSSH lines", append(sshLine(t, edPub), sshLine(t, edPub)...), "more than one line"},
		{"authorized_keys options", append([]byte(`from="10.0.0.1" `), sshLine(t, edPub)...), "with options"},
		{"garbage", []byte("hello"), "neither a PEM public key nor an OpenSSH public key line"},
		{"P-384", pkixPEM(t, &p384.PublicKey), "keyset EC keys are P-256"},
		{"RSA 1024", pkixPEM(t, &small.PublicKey), "RSA keys must have 2048"},
	} {
		pub, err := ParsePublicKey("f", c.data)
		if err == nil {
			_, err = FromPublicKey("key", pub, "")
		}
		if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want invalid containing %q", c.name, err, c.want)
		}
	}
}
