package receipts

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/intoto"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// fakeRendered is a release for r's inventory: render and object digests
// made up from r's identities (the receipts package never renders).
func fakeRendered(r *Receipt) *Rendered {
	rel := &Rendered{RenderDigest: canon.DigestBytes(canon.DomainRender, []byte(r.Deployment.LockDigest))}
	for _, id := range r.Inventory {
		rel.Objects = append(rel.Objects, RenderedObject{ID: id, Digest: canon.DigestBytes(canon.DomainObject, []byte(id.String()))})
	}
	return rel
}

func mustAttest(t testing.TB, r *Receipt, k []byte) []byte {
	t.Helper()
	a, err := Attest(r, fakeRendered(r), k)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The attestation says what docs/receipts.md §7 says: predicate type ours,
// predicate the receipt's bytes, subjects the receipt file's SHA-256, the
// inventory, lock and render digests and each object's digest under its
// key's name, signed by the receipt's key under its key id.
func TestAttestationContent(t *testing.T) {
	r := following(newReceipt().sealed(t), KindUpgrade, "3.1.0").sealed(t)
	data := mustBytes(t, r)
	st, err := intoto.Verify(mustAttest(t, r, testKey(1)), trusted(1))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	rel := fakeRendered(r)
	want := []intoto.Subject{
		{Name: "000002-upgrade-3.1.0.receipt.json", SHA256: hex.EncodeToString(sum[:])},
		{Name: InventorySubject, SHA256: strings.TrimPrefix(r.Deployment.InventoryDigest, "sha256:")},
		{Name: LockSubject, SHA256: strings.TrimPrefix(r.Deployment.LockDigest, "sha256:")},
		{Name: RenderSubject, SHA256: strings.TrimPrefix(rel.RenderDigest, "sha256:")},
	}
	for _, o := range rel.Objects {
		want = append(want, intoto.Subject{Name: ObjectSubject(o.ID), SHA256: strings.TrimPrefix(o.Digest, "sha256:")})
	}
	if st.PredicateType != PredicateType || !bytes.Equal(st.Predicate, data) || !slices.Equal(st.Subjects, want) {
		t.Fatalf("statement %+v", st)
	}
	if got := ObjectSubject(canon.Identity{APIVersion: "v1", Kind: "Namespace", Name: "qinglong-prod"}); got != "kubectl-ql3/object/v1//Namespace//qinglong-prod" {
		t.Fatalf("object subject %q", got)
	}
	if got := ObjectSubject(canon.Identity{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "p", Name: "control"}); got != "kubectl-ql3/object/v1/apps/Deployment/p/control" {
		t.Fatalf("object subject %q", got)
	}
	if AttestationName(r) != "000002-upgrade-3.1.0.intoto.json" {
		t.Fatalf("name %q", AttestationName(r))
	}
	if _, err := intoto.Verify(mustAttest(t, r, testKey(1)), trusted(2)); err == nil {
		t.Fatal("verified under an untrusted key")
	}
}

// Publish never replaces an attestation: another key's attestation of the
// same receipt is a conflict, anything else there tamper; the file is
// left as it was.
func TestPublishAttestationNoReplace(t *testing.T) {
	for _, c := range []struct {
		name    string
		there   func(r *Receipt) []byte
		class   fail.Class
		message string
	}{
		{"another key's attestation", func(r *Receipt) []byte { return mustAttest(t, r, testKey(2)) }, fail.Conflict, "already exists, by key"},
		{"another receipt's attestation", func(r *Receipt) []byte {
			return mustAttest(t, newReceipt().with(func(r *Receipt) { r.Transition.ForceConflicts = true }).sealed(t), testKey(1))
		}, fail.Tamper, "not an attestation of this receipt"},
		{"junk", func(*Receipt) []byte { return []byte("junk") }, fail.Tamper, "not an attestation of this receipt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			r := newReceipt().sealed(t)
			path := filepath.Join(dir, AttestationName(r))
			there := c.there(r)
			if err := os.WriteFile(path, there, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Publish(dir, r, testKey(1), fakeRendered(r))
			if fail.ClassOf(err) != c.class || !strings.Contains(err.Error(), c.message) {
				t.Fatalf("err %v (class %v), want %v with %q", err, fail.ClassOf(err), c.class, c.message)
			}
			if got := mustRead(t, path); !bytes.Equal(got, there) {
				t.Fatal("attestation changed")
			}
		})
	}
}

// No key, no envelope: an unsigned publish writes the receipt alone (an
// attestation nobody signed would prove nothing); a signer without the
// release the deployment applied is refused before anything is written.
func TestUnsignedReceiptHasNoAttestation(t *testing.T) {
	dir := t.TempDir()
	r := newReceipt().sealed(t)
	res, err := Publish(dir, r, nil, fakeRendered(r))
	if err != nil || res.SignaturePath != "" || res.AttestationPath != "" {
		t.Fatalf("unsigned publish: %+v %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(dir, AttestationName(r))); !os.IsNotExist(err) {
		t.Fatalf("an unsigned receipt got an attestation: %v", err)
	}
	other := t.TempDir()
	if _, err := Publish(other, r, testKey(1), nil); !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "the rendered release it applied is required") {
		t.Fatalf("signed publish without the release: %v", err)
	}
	if entries, _ := os.ReadDir(other); len(entries) != 0 {
		t.Fatalf("a refused publish wrote %v", entries)
	}
	rep := mustAudit(t, []string{dir}, AuditOptions{})
	if !rep.OK() || rep.Receipts[0].Attestation != "" {
		t.Fatalf("audit of an unsigned receipt: %+v", rep.Receipts)
	}
}
