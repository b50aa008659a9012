// Package interop_test runs a verifier nobody here wrote, cosign (built
// pinned into bin/tools by `make tools`), on the attestations receipts
// publishes (docs/receipts.md §7), offline: no transparency log, no TUF,
// every proxy pointing at a closed port.
package interop_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/qinglong/kubectl-ql3/internal/testkit"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// verify runs `cosign verify-blob-attestation` offline and returns its
// output and exit code.
func verify(t *testing.T, pub, typ, envelope, subject string) (string, int) {
	t.Helper()
	return testkit.CosignVerifyAttestation(t, pub, typ, envelope, subject)
}

// signer is a fixed Ed25519 key (seed byte b repeated) and its public key
// file in dir.
func signer(t *testing.T, dir string, b byte) (ed25519.PrivateKey, string) {
	t.Helper()
	k := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
	return k, testkit.PublicKeyFile(t, filepath.Join(dir, string('a'+b%26)+".pub"), k)
}

// madeUpRelease states r's inventory with made-up render and object
// digests: the interop test publishes without rendering.
func madeUpRelease(r *receipts.Receipt) *receipts.Rendered {
	rel := &receipts.Rendered{RenderDigest: r.Deployment.LockDigest}
	for _, id := range r.Inventory {
		rel.Objects = append(rel.Objects, receipts.RenderedObject{ID: id, Digest: r.Deployment.InventoryDigest})
	}
	return rel
}

func write(t *testing.T, path string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCosignVerifiesAttestation publishes the worked receipt signed, then
// has cosign verify its attestation against each subject's file: accepted;
// refused when a byte of the envelope's signature, of the payload or of
// the subject file changed, under another key, or for another predicate
// type.
func TestCosignVerifiesAttestation(t *testing.T) {
	ex := testkit.DocExamples(t, "receipts.md", "receipt")
	data, err := jcs.Transform([]byte(ex["receipt"]))
	if err != nil {
		t.Fatal(err)
	}
	r, err := receipts.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	dir, keys := t.TempDir(), t.TempDir()
	key, pub := signer(t, keys, 1)
	_, otherPub := signer(t, keys, 2)
	res, err := receipts.Publish(dir, r, key, madeUpRelease(r))
	if err != nil || res.AttestationPath == "" {
		t.Fatalf("publish: %+v %v", res, err)
	}
	env, err := os.ReadFile(res.AttestationPath)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := json.Marshal(r.Inventory)
	if err != nil {
		t.Fatal(err)
	}
	invCanon, err := jcs.Transform(inv)
	if err != nil {
		t.Fatal(err)
	}
	invFile := write(t, filepath.Join(keys, "inventory"), append([]byte("kubectl-ql3/inventory/v1\x00"), invCanon...))

	for _, subject := range []string{res.Path, invFile} {
		if out, code := verify(t, pub, receipts.PredicateType, res.AttestationPath, subject); code != 0 || !strings.Contains(out, "Verified OK") {
			t.Fatalf("cosign refused the attestation for %s: exit %d\n%s", filepath.Base(subject), code, out)
		}
	}

	var e struct {
		Payload     string `json:"payload"`
		PayloadType string `json:"payloadType"`
		Signatures  []struct {
			KeyID string `json:"keyid"`
			Sig   string `json:"sig"`
		} `json:"signatures"`
	}
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatal(err)
	}
	payload, _ := base64.StdEncoding.DecodeString(e.Payload)
	sigChanged := e
	sigChanged.Signatures = append(sigChanged.Signatures[:0:0], e.Signatures...)
	sigChanged.Signatures[0].Sig = map[bool]string{true: "B", false: "A"}[e.Signatures[0].Sig[0] == 'A'] + e.Signatures[0].Sig[1:]
	payloadChanged := e
	payloadChanged.Payload = base64.StdEncoding.EncodeToString(bytes.Replace(payload, []byte(`"forceConflicts":false`), []byte(`"forceConflicts":true`), 1))
	marshal := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	changedSubject := bytes.Replace(data, []byte(`"forceConflicts":false`), []byte(`"forceConflicts":true`), 1)
	const badSignature = "accepted signatures do not match threshold, Found: 0, Expected 1"
	for _, c := range []struct {
		name, pub, typ, envelope, subject, want string
	}{
		{"a byte of the envelope's signature", pub, receipts.PredicateType, write(t, filepath.Join(keys, "sig.intoto.json"), marshal(sigChanged)), res.Path, badSignature},
		{"a byte of the payload", pub, receipts.PredicateType, write(t, filepath.Join(keys, "payload.intoto.json"), marshal(payloadChanged)), res.Path, badSignature},
		{"a byte of the subject file", pub, receipts.PredicateType, res.AttestationPath, write(t, filepath.Join(keys, "changed.receipt.json"), changedSubject), "no matching subject digest found"},
		{"another key", otherPub, receipts.PredicateType, res.AttestationPath, res.Path, badSignature},
		{"another predicate type", pub, "https://slsa.dev/provenance/v1", res.AttestationPath, res.Path, "invalid predicate type, expected https://slsa.dev/provenance/v1 got " + receipts.PredicateType},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, code := verify(t, c.pub, c.typ, c.envelope, c.subject)
			if code == 0 || strings.Contains(out, "Verified OK") || !strings.Contains(out, c.want) {
				t.Fatalf("cosign: exit %d, want a refusal saying %q\n%s", code, c.want, out)
			}
		})
	}
}
