package receipts

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/qinglong/kubectl-ql3/internal/testkit"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// docExamples reads the fenced blocks marked "<!-- example:NAME -->" out of
// docs/receipts.md.
func docExamples(t *testing.T) map[string]string {
	t.Helper()
	return testkit.DocExamples(t, "receipts.md", "receipt", "file-name", "inventory-digest", "self-digest", "signing-seed", "public-key", "signature")
}

// TestDocExample recomputes every value the worked example states.
func TestDocExample(t *testing.T) {
	ex := docExamples(t)
	data, err := jcs.Transform([]byte(ex["receipt"]))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mustReadDoc(t)), "(2209 bytes, one line)") || len(data) != 2209 {
		t.Errorf("canonical example is %d bytes; fix the size stated in the doc", len(data))
	}
	r, err := Parse(data)
	if err != nil {
		t.Fatalf("the example does not parse: %v", err)
	}
	if got := FileName(r); got != ex["file-name"] {
		t.Errorf("file name %q, doc says %q", got, ex["file-name"])
	}
	if got, _ := canon.InventoryDigest(r.Inventory); got != ex["inventory-digest"] {
		t.Errorf("inventory digest %q, doc says %q", got, ex["inventory-digest"])
	}
	if got, _ := SelfDigestOf(r); got != ex["self-digest"] || r.SelfDigest != got {
		t.Errorf("receipt digest %q, doc says %q", got, ex["self-digest"])
	}

	// The members a receipt copies from its Head that are functions of
	// other members (docs/receipts.md §2.4): the deployment digest is
	// docs/head.md's formula over the receipt's own fields, and both
	// identity steps are the identity transcript of target.clusterIdentity.
	view := map[string]any{
		"generation": r.Generation, "transition": r.Transition, "current": r.Deployment,
		"previous": r.PreviousDeployment, "target": r.Target, "tool": r.Tool,
		"previousReceiptDigest": r.PreviousReceiptDigest,
	}
	if got, err := canon.DigestOf(canon.DomainDeployment, view); err != nil || got != r.Head.DeploymentDigest {
		t.Errorf("head.deploymentDigest %q, but the formula over the receipt gives %q (%v)", r.Head.DeploymentDigest, got, err)
	}
	identity := map[string]any{"step": "identity", "record": map[string]string{"clusterIdentity": r.Target.ClusterIdentity}}
	if got, err := canon.DigestOf(canon.DomainTranscript, identity); err != nil || got != r.Steps.Identity || got != r.Steps.FinalIdentity {
		t.Errorf("steps.identity %q, steps.finalIdentity %q, but the identity transcript of the target is %q (%v)", r.Steps.Identity, r.Steps.FinalIdentity, got, err)
	}

	seed, err := hex.DecodeString(ex["signing-seed"])
	if err != nil {
		t.Fatal(err)
	}
	key := ed25519.NewKeyFromSeed(seed)
	der, _ := x509.MarshalPKIXPublicKey(key.Public())
	if got := strings.TrimSpace(string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))); got != ex["public-key"] {
		t.Errorf("public key:\n%s\ndoc says:\n%s", got, ex["public-key"])
	}
	sig, err := Sign(r, key)
	if err != nil {
		t.Fatal(err)
	}
	if string(sig) != ex["signature"] {
		t.Errorf("signature file:\n%s\ndoc says:\n%s", sig, ex["signature"])
	}

	// And the audit accepts the example as a truncated, signed history.
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, ex["file-name"]), data, 0o644)
	_ = os.WriteFile(filepath.Join(dir, ex["file-name"]+".sig"), []byte(ex["signature"]), 0o644)
	pub := filepath.Join(dir, "key.pub")
	_ = os.WriteFile(pub, []byte(ex["public-key"]+"\n"), 0o644)
	keys, err := LoadTrustedKeys([]string{pub})
	if err != nil {
		t.Fatal(err)
	}
	rep := mustAudit(t, []string{dir}, AuditOptions{TrustedKeys: keys, BaseGeneration: 2})
	if !rep.OK() || rep.Receipts[0].Signature != SignatureVerified {
		t.Fatalf("audit of the example:\n%s", failures(rep))
	}
}

func mustReadDoc(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "receipts.md"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
