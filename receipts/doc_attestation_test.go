package receipts

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"

	"github.com/qinglong/kubectl-ql3/internal/intoto"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// docRendered is the release of the doc's objects (a JSON array in
// inventory order): render digest and object digests recomputed here.
func docRendered(t *testing.T, r *Receipt, objects string) *Rendered {
	t.Helper()
	var objs []map[string]any
	if err := json.Unmarshal([]byte(objects), &objs); err != nil || len(objs) != len(r.Inventory) {
		t.Fatalf("example:attestation-objects: %v (%d objects)", err, len(objs))
	}
	render, err := canon.DigestOf(canon.DomainRender, objs)
	if err != nil {
		t.Fatal(err)
	}
	rel := &Rendered{RenderDigest: render}
	for i, o := range objs {
		d, err := canon.DigestOf(canon.DomainObject, o)
		if err != nil {
			t.Fatal(err)
		}
		rel.Objects = append(rel.Objects, RenderedObject{ID: r.Inventory[i], Digest: d})
	}
	return rel
}

// TestDocAttestationExample recomputes every value docs/receipts.md §7.5
// states from the worked receipt, objects and key of §6 and §7.5, checks
// the files against the conformance vector's, and audits it.
func TestDocAttestationExample(t *testing.T) {
	ex := testkit.DocExamples(t, "receipts.md", "receipt", "signing-seed", "public-key", "signature", "attestation-file-name",
		"attestation-objects", "attestation-subjects", "attestation-payload-sha256", "attestation-pae-header", "attestation")
	data, err := jcs.Transform([]byte(ex["receipt"]))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := hex.DecodeString(ex["signing-seed"])
	env, err := Attest(r, docRendered(t, r, ex["attestation-objects"]), ed25519.NewKeyFromSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := os.ReadFile(filepath.Join("..", "testdata", "vectors", "receipts", "doc-receipt-attested", "rendered-objects.json"))
	if err != nil || !bytes.Equal(objs, mustCanonical(t, json.RawMessage(ex["attestation-objects"]))) {
		t.Errorf("the conformance vector's rendered-objects.json is not the canonical JSON of example:attestation-objects (%v)", err)
	}
	if string(env) != ex["attestation"] {
		t.Errorf("attestation file:\n%s\ndoc says:\n%s", env, ex["attestation"])
	}
	if got := AttestationName(r); got != ex["attestation-file-name"] {
		t.Errorf("file name %q, doc says %q", got, ex["attestation-file-name"])
	}
	vector, err := os.ReadFile(filepath.Join("..", "testdata", "vectors", "receipts", "doc-receipt-attested", ex["attestation-file-name"]))
	if err != nil || !bytes.Equal(vector, env) {
		t.Errorf("the conformance vector's attestation is not the worked one (%v)", err)
	}

	var e dsse.Envelope
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	payload, _ := base64.StdEncoding.DecodeString(e.Payload)
	var st struct{ Subject json.RawMessage }
	if err := json.Unmarshal(payload, &st); err != nil {
		t.Fatal(err)
	}
	if got := string(mustCanonical(t, st.Subject)); got != ex["attestation-subjects"] {
		t.Errorf("subjects %s, doc says %s", got, ex["attestation-subjects"])
	}
	sum := sha256.Sum256(payload)
	if hex.EncodeToString(sum[:]) != ex["attestation-payload-sha256"] {
		t.Errorf("payload sha256 %x, doc says %s", sum, ex["attestation-payload-sha256"])
	}
	doc := string(mustReadDoc(t))
	if !strings.Contains(doc, fmt.Sprintf("Its payload is %d bytes", len(payload))) || !strings.Contains(doc, fmt.Sprintf("the receipt's %d bytes as `predicate`", len(data))) {
		t.Errorf("payload is %d bytes, receipt %d: fix the sizes the doc states", len(payload), len(data))
	}
	if pae := dsse.PAE(intoto.PayloadType, payload); !bytes.HasPrefix(pae, []byte(ex["attestation-pae-header"]+" "+"{")) {
		t.Errorf("PAE starts %q, doc says %q", pae[:60], ex["attestation-pae-header"])
	}

	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, FileName(r)), data, 0o644)
	_ = os.WriteFile(filepath.Join(dir, FileName(r)+".sig"), []byte(ex["signature"]), 0o644)
	_ = os.WriteFile(filepath.Join(dir, ex["attestation-file-name"]), []byte(ex["attestation"]), 0o644)
	pub := filepath.Join(dir, "key.pub")
	_ = os.WriteFile(pub, []byte(ex["public-key"]+"\n"), 0o644)
	keys, err := LoadTrustedKeys([]string{pub})
	if err != nil {
		t.Fatal(err)
	}
	rep := mustAudit(t, []string{dir}, AuditOptions{TrustedKeys: keys, BaseGeneration: 2})
	if !rep.OK() || rep.Receipts[0].Attestation != SignatureVerified {
		t.Fatalf("audit of the example:\n%s", failures(rep))
	}
}
