package interop_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/internal/testkit"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// beyondCosign are the attestation vectors `receipt audit` refuses and
// cosign accepts, each for a rule cosign does not check
// (docs/receipts.md §7.4): every other vector gets the same verdict from
// both.
var beyondCosign = map[string]string{
	"attestation-trailing-newline":       "§7.3 step 1: cosign reads any JSON, not only the canonical bytes",
	"attestation-two-signatures":         "§7.3 step 1: cosign needs one verifying signature, not exactly one",
	"attestation-subject-uri":            "§7.3 step 2: cosign allows members beyond §7.2",
	"attestation-predicate":              "§7.3 step 5: cosign does not read the predicate",
	"attestation-render-subject-name":    "§7.3 step 6: cosign matches a subject's digest, never its name",
	"attestation-object-subject-order":   "§7.3 step 6: cosign matches a subject's digest, never its place",
	"attestation-object-subject-version": "§7.3 step 6: cosign matches a subject's digest, never its name",
	"chain-orphan-attestation":           "§5.2 rule 4: cosign checks one attestation, not a directory's chain",
}

type receiptVector struct {
	Name       string            `json:"name"`
	Input      string            `json:"input"`
	Parameters map[string]string `json:"parameters"`
	Verdict    string            `json:"verdict"`
}

// expectedSubjects are the sha256 digests a verifier holding the receipt
// and the release it applied computes (docs/receipts.md §7.2),
// independently of the attestation: the receipt file's bytes, the
// inventory and lock digests the receipt states, and the render and
// object subjects' files — from the vector's release as `render --subject`
// writes them, or else from the worked example's objects
// (doc-receipt-attested/rendered-objects.json) — each as cosign's --digest.
func expectedSubjects(t *testing.T, vectors, receiptFile, release string) []string {
	t.Helper()
	data, err := os.ReadFile(receiptFile)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Deployment struct{ InventoryDigest, LockDigest string }
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	out := []string{plain(data), r.Deployment.InventoryDigest, r.Deployment.LockDigest}
	if release != "" {
		rel, _, err := inventory.LoadRelease(filesys.MakeFsOnDisk(), filepath.Join(vectors, release), inventory.Options{})
		if err != nil {
			t.Fatal(err)
		}
		files := [][]byte{must(t)(rel.RenderInput())}
		for i := range rel.Inventory {
			files = append(files, must(t)(rel.ObjectInput(i)))
		}
		for _, f := range files {
			out = append(out, plain(f))
		}
		return out
	}
	objs, err := os.ReadFile(filepath.Join(vectors, "doc-receipt-attested", "rendered-objects.json"))
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, domain("render", objs))
	var items []json.RawMessage
	if err := json.Unmarshal(objs, &items); err != nil {
		t.Fatal(err)
	}
	for _, o := range items {
		c, err := jcs.Transform(o)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, domain("object", c))
	}
	return out
}

func must(t *testing.T) func([]byte, error) []byte {
	return func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

func plain(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func domain(d string, data []byte) string {
	return plain(append([]byte("kubectl-ql3/"+d+"/v1\x00"), data...))
}

// cosignVerdict is "accept" when cosign verifies every attestation of dir
// that has its receipt beside it, for every subject a verifier expects.
func cosignVerdict(t *testing.T, vectors, dir, release, pub string) string {
	t.Helper()
	atts, _ := filepath.Glob(filepath.Join(dir, "*"+receipts.AttestationSuffix))
	for _, att := range atts {
		rf := strings.TrimSuffix(att, receipts.AttestationSuffix) + receipts.FileSuffix
		if _, err := os.Stat(rf); err != nil {
			continue // an orphan: no artifact to give cosign
		}
		for _, d := range expectedSubjects(t, vectors, rf, release) {
			if out, code := testkit.CosignVerifyAttestation(t, pub, receipts.PredicateType, att, d); code != 0 || !strings.Contains(out, "Verified OK") {
				t.Logf("cosign refuses %s for %s: %s", filepath.Base(att), d, lastLine(out))
				return "reject"
			}
		}
	}
	return "accept"
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestAuditAgreesWithCosign runs `receipt audit` and cosign on every
// receipts vector that holds an attestation: both accept the worked one;
// where cosign refuses, the audit refuses too; and the audit refuses
// beyond cosign exactly the vectors beyondCosign lists, for the rules
// cosign does not check.
func TestAuditAgreesWithCosign(t *testing.T) {
	root, err := testkit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	vectors := filepath.Join(root, "testdata", "vectors", "receipts")
	var file struct{ Vectors []receiptVector }
	raw, err := os.ReadFile(filepath.Join(vectors, "vectors.json"))
	if err == nil {
		err = json.Unmarshal(raw, &file)
	}
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, v := range file.Vectors {
		dir := filepath.Join(vectors, v.Input)
		if atts, _ := filepath.Glob(filepath.Join(dir, "*"+receipts.AttestationSuffix)); len(atts) == 0 {
			continue
		}
		seen[v.Name] = true
		t.Run(v.Name, func(t *testing.T) {
			pub := filepath.Join(vectors, "keys", "rfc8032-test1.pub")
			audit := auditVerdict(t, dir, v, pub)
			if audit != v.Verdict {
				t.Fatalf("audit %s, vectors.json says %s", audit, v.Verdict)
			}
			cosign := cosignVerdict(t, vectors, dir, v.Parameters["release"], pub)
			why, beyond := beyondCosign[v.Name]
			switch {
			case audit == cosign && beyond:
				t.Fatalf("audit and cosign both %s, but beyondCosign says the audit alone refuses it (%s)", audit, why)
			case audit != cosign && !(beyond && audit == "reject"):
				t.Fatalf("audit %s, cosign %s", audit, cosign)
			}
		})
	}
	var missing []string
	for name := range beyondCosign {
		if !seen[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("beyondCosign names vectors that are not attestation vectors: %v", missing)
	}
}

// auditVerdict audits dir as the vector runner does, with the TEST 1 key
// trusted.
func auditVerdict(t *testing.T, dir string, v receiptVector, pub string) string {
	t.Helper()
	base, err := strconv.ParseInt(v.Parameters["fromGeneration"], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := receipts.LoadTrustedKeys([]string{pub})
	if err != nil {
		t.Fatal(err)
	}
	opts := receipts.AuditOptions{TrustedKeys: keys, BaseGeneration: base}
	if r := v.Parameters["release"]; r != "" {
		opts.Release = releaseDigests(filepath.Join(filepath.Dir(dir), r))
	}
	rep, err := receipts.Audit([]string{dir}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() {
		return "accept"
	}
	return "reject"
}

// releaseDigests is what `receipt audit --release dir` compares.
func releaseDigests(dir string) func() (receipts.ReleaseDigests, error) {
	return func() (receipts.ReleaseDigests, error) {
		rel, lock, err := inventory.LoadRelease(filesys.MakeFsOnDisk(), dir, inventory.Options{})
		if err != nil {
			return receipts.ReleaseDigests{}, err
		}
		lockDigest, err := lock.Digest()
		if err != nil {
			return receipts.ReleaseDigests{}, err
		}
		digests, err := rel.ObjectDigests()
		rendered := &receipts.Rendered{RenderDigest: rel.RenderDigest}
		for i, d := range digests {
			rendered.Objects = append(rendered.Objects, receipts.RenderedObject{ID: rel.Inventory[i], Digest: d})
		}
		return receipts.ReleaseDigests{Version: lock.Release.Version, LockDigest: lockDigest, InventoryDigest: rel.InventoryDigest, Rendered: rendered}, err
	}
}
