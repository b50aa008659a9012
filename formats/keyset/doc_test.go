package keyset

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"regexp"
	"strings"
	"testing"
)

var docBlockRE = regexp.MustCompile("(?ms)^```[a-z]+ (keyset|canonical|digest|ledger)=(\\S+)\n(.*?)^```$")

// TestKeysetDoc recomputes the worked example of docs/keyset.md: the
// example file parses, its canonical JSON and digest are the documented
// ones, and the digest is the documented formula over that text.
func TestKeysetDoc(t *testing.T) {
	doc, err := os.ReadFile("../../docs/keyset.md")
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
}
