package jwkset

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

var docBlockRE = regexp.MustCompile("(?ms)^```[a-z]+ (keyset|canonical|digest|ledger|thumbprint|thumbprint-input|error)=(\\S+)\n(.*?)^```$")

// TestKeysetDoc recomputes the worked example of docs/keyset.md: the
// example file parses, its canonical JSON and digest are the documented
// ones, and the digest is the documented formula over that text.
func TestKeysetDoc(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/keyset.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]string{}
	for _, m := range docBlockRE.FindAllStringSubmatch(string(doc), -1) {
		blocks[m[1]+"="+m[2]] = m[3]
	}
	file, canonical, digest := blocks["keyset=example"], strings.TrimSpace(blocks["canonical=example"]), strings.TrimSpace(blocks["digest=example"])
	if file == "" || canonical == "" || digest == "" {
		t.Fatalf("docs/keyset.md lacks an example block: %q", blocks)
	}
	k, err := Parse([]byte(file))
	if err != nil {
		t.Fatalf("the documented example is not a valid keyset: %v", err)
	}
	c, err := k.Canonical()
	if err != nil || string(c) != canonical {
		t.Fatalf("canonical JSON:\n got %s\nwant %s", c, canonical)
	}
	sum := sha256.Sum256([]byte("kubectl-ql3/keyset/v1\x00" + canonical))
	if want := "sha256:" + hex.EncodeToString(sum[:]); want != digest {
		t.Fatalf("the documented digest %s is not the formula's %s", digest, want)
	}
	if d, err := k.Digest(); err != nil || d != digest {
		t.Fatalf("Digest = %s, %v; doc says %s", d, err, digest)
	}
	// The ledger the example generation starts, as documented.
	ledger := strings.TrimSpace(blocks["ledger=example"])
	l, err := NewLedger(nil, k)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := l.Bytes(); err != nil || string(b) != ledger {
		t.Fatalf("ledger of the example:\n got %s\nwant %s", b, ledger)
	}
	if _, err := ParseLedger([]byte(ledger)); err != nil {
		t.Fatalf("the documented ledger does not parse: %v", err)
	}
	checkThumbprintDoc(t, blocks, k)
	checkRevocationDoc(t, blocks, l)
}

// checkThumbprintDoc: the documented thumbprint input is the example key's
// required members, and the thumbprint its unpadded base64url SHA-256.
func checkThumbprintDoc(t *testing.T, blocks map[string]string, k *Keyset) {
	t.Helper()
	input, tp := strings.TrimSpace(blocks["thumbprint-input=example"]), strings.TrimSpace(blocks["thumbprint=example"])
	j := k.Keys[0]
	want, err := canon.Canonical(map[string]string{"crv": j.Crv, "kty": j.Kty, "x": j.X})
	if err != nil || string(want) != input {
		t.Fatalf("thumbprint input:\n got %s\nwant %s", input, want)
	}
	sum := sha256.Sum256([]byte(input))
	if f := base64.RawURLEncoding.EncodeToString(sum[:]); f != tp || j.Thumbprint() != tp {
		t.Fatalf("the documented thumbprint %s; formula %s, Thumbprint %s", tp, f, j.Thumbprint())
	}
}

// checkRevocationDoc: the revoking generation appends to the example's
// ledger exactly the documented ledger, and the generation bringing the
// revoked key back under a new key ID is refused with the documented
// error, by the ledger alone.
func checkRevocationDoc(t *testing.T, blocks map[string]string, l *Ledger) {
	t.Helper()
	parse := func(name string) *Keyset {
		k, err := Parse([]byte(blocks["keyset="+name]))
		if err != nil {
			t.Fatalf("the documented keyset %s: %v", name, err)
		}
		return k
	}
	next, _, err := l.Admit(parse("next"))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := next.Bytes(); err != nil || string(b) != strings.TrimSpace(blocks["ledger=next"]) {
		t.Fatalf("ledger after the revoking generation:\n got %s\nwant %s", b, blocks["ledger=next"])
	}
	_, _, err = next.Admit(parse("revived"))
	if want := strings.TrimSpace(blocks["error=revived"]); err == nil || err.Error() != want || !fail.Is(err, fail.Conflict) {
		t.Fatalf("the revived key:\n got %v\nwant %s", err, want)
	}
}
