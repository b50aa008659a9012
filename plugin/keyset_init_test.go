package plugin_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/qinglong/kubectl-ql3/ceremony/keyset/jwkset"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// The keyset journey with the tool alone (#23 part 3): public keys as users
// hold them -> keyset init -> verify -> publish generation 1 on the real API
// server; a new key -> keyset jwk -> plan-rotation -> publish the overlap.
func TestCLIKeysetInitJourney(t *testing.T) {
	ns := cp.Namespace(t)
	dir := t.TempDir()
	edPub, _, _ := ed25519.GenerateKey(rand.Reader)
	sshKey, _ := ssh.NewPublicKey(edPub)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	rs, _ := rsa.GenerateKey(rand.Reader, 2048)
	files := map[string][]byte{
		"ops.pub":  append(bytes.TrimSuffix(ssh.MarshalAuthorizedKey(sshKey), []byte("\n")), " ops@laptop\n"...),
		"ci.pem":   pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: ecDER}),
		"hsm.pem":  pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&rs.PublicKey)}),
		"priv.pem": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: must(x509.MarshalPKCS8PrivateKey(rs))}),
	}
	for name, data := range files {
		os.WriteFile(filepath.Join(dir, name), data, 0o600)
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	g1 := p("keyset-1.json")
	out := mustRun(t, nil, "keyset", "init", "--key", p("ops.pub"), "--kid", "ops-2026-12", "--key", p("ci.pem"), "--key", p("hsm.pem"), "--out", g1)
	if !strings.Contains(out, "generation 1, 3 key(s)") {
		t.Fatalf("init: %s", out)
	}
	data, _ := os.ReadFile(g1)
	k, err := jwkset.Parse(data)
	if err != nil || k.Generation != 1 || k.Keys[0].Kid != "ops-2026-12" || k.Keys[1].Kid != k.Keys[1].Thumbprint() || k.Keys[2].Kty != jwkset.KtyRSA {
		t.Fatalf("keyset-1.json: %v\n%s", err, data)
	}
	mustRun(t, nil, "keyset", "verify", g1)
	mustRun(t, nil, "keyset", "publish", g1, "-n", ns)

	newPub, _, _ := ed25519.GenerateKey(rand.Reader)
	newDER, _ := x509.MarshalPKIXPublicKey(newPub)
	os.WriteFile(p("new.pem"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: newDER}), 0o644)
	jwk := mustRun(t, nil, "keyset", "jwk", "--key", p("new.pem"), "--kid", "ops-2027-01")
	os.WriteFile(p("new.jwk.json"), []byte(jwk), 0o644)
	mustRun(t, nil, "keyset", "plan-rotation", "--current", g1, "--add", p("new.jwk.json"), "--revoke", "ops-2026-12")
	mustRun(t, nil, "keyset", "publish", p("keyset-2.json"), "-n", ns, "--previous", g1)

	// Refusals: exit 2, nothing written.
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"a private key", []string{"keyset", "init", "--key", p("priv.pem"), "--out", p("x.json")}, "never a private key"},
		{"more kids than keys", []string{"keyset", "init", "--key", p("ci.pem"), "--kid", "a", "--kid", "b", "--out", p("x.json")}, "2 --kid values for 1 --key"},
		{"one key twice", []string{"keyset", "init", "--key", p("ci.pem"), "--key", p("ci.pem"), "--out", p("x.json")}, "duplicate key ID"},
		{"an existing --out", []string{"keyset", "init", "--key", p("ci.pem"), "--out", g1}, "is never replaced"},
		{"jwk of two keys", []string{"keyset", "jwk", "--key", p("ci.pem"), "--key", p("ops.pub")}, "exactly one public key file"},
	} {
		_, stderr, code := run(t, nil, c.args...)
		if code != fail.Invalid.ExitCode() || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, want %d with %q: %s", c.name, code, fail.Invalid.ExitCode(), c.want, stderr)
		}
	}
	if _, err := os.Stat(p("x.json")); err == nil {
		t.Error("a refused init wrote x.json")
	}
	if after, _ := os.ReadFile(g1); string(after) != string(data) {
		t.Error("a refused init changed keyset-1.json")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
