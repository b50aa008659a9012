package deploy_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// attestKey signs the receipts (and so the attestations) of the attested
// deployments; otherKey is a key nobody trusts.
var (
	attestKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	otherKey  = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{8}, ed25519.SeedSize))
)

// signed is o signing receipts with attestKey (apply's --sign-key).
func signed(o deploy.Options) deploy.Options {
	o.SignKey = attestKey
	return o
}

// releaseDigests is what `receipt audit --release dir` compares: the
// release rendered offline and verified against its lock.
func releaseDigests(t *testing.T, dir string) func() (receipts.ReleaseDigests, error) {
	return func() (receipts.ReleaseDigests, error) {
		rel, lock, err := inventory.LoadRelease(filesys.MakeFsOnDisk(), dir, inventory.Options{})
		if err != nil {
			return receipts.ReleaseDigests{}, err
		}
		lockDigest, err := lock.Digest()
		if err != nil {
			return receipts.ReleaseDigests{}, err
		}
		rendered, err := deploy.RenderedOf(rel)
		return receipts.ReleaseDigests{Version: lock.Release.Version, LockDigest: lockDigest, InventoryDigest: rel.InventoryDigest, Rendered: rendered}, err
	}
}

// assertAttested audits rdir as `receipt audit --trusted-key --release
// dir` does: want receipts, each with an attestation verified by
// attestKey, the chain whole, and the release dir's render and objects
// what the newest receipt's attestation states.
func assertAttested(t *testing.T, rdir, dir string, want int) {
	t.Helper()
	pub := testkit.PublicKeyFile(t, filepath.Join(t.TempDir(), "receipt.pub"), attestKey)
	keys, err := receipts.LoadTrustedKeys([]string{pub})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := receipts.Audit([]string{rdir}, receipts.AuditOptions{TrustedKeys: keys, Release: releaseDigests(t, dir)})
	if err != nil || !rep.OK() || len(rep.Receipts) != want || rep.Release == nil || rep.Release.Verdict != receipts.VerdictOK {
		b, _ := json.MarshalIndent(rep, "", " ")
		t.Fatalf("audit with the release: %v, want %d receipts\n%s", err, want, b)
	}
	for _, row := range rep.Receipts {
		if row.Attestation != receipts.SignatureVerified {
			t.Fatalf("%s: attestation %q, want verified", row.File, row.Attestation)
		}
	}
}

// envelopeOf is the attestation beside the receipt file path.
func envelopeOf(path string) string {
	return strings.TrimSuffix(path, receipts.FileSuffix) + receipts.AttestationSuffix
}

// cosignAccepts runs cosign verify-blob-attestation with attestKey's
// public key and fails unless it prints Verified OK for every subject.
func cosignAccepts(t *testing.T, envelope string, subjects ...string) {
	t.Helper()
	pub := testkit.PublicKeyFile(t, filepath.Join(t.TempDir(), "receipt.pub"), attestKey)
	for _, s := range subjects {
		if out, code := testkit.CosignVerifyAttestation(t, pub, receipts.PredicateType, envelope, s); code != 0 || !strings.Contains(out, "Verified OK") {
			t.Fatalf("cosign refused %s for %s: exit %d\n%s", filepath.Base(envelope), filepath.Base(s), code, out)
		}
	}
}

// subjectFile writes the file of the attestation subject name for the
// release dir, as `kubectl ql3 render DIR --subject NAME` does.
func subjectFile(t *testing.T, dir, name string) string {
	t.Helper()
	rel, lock, err := inventory.LoadRelease(filesys.MakeFsOnDisk(), dir, inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var data []byte
	switch name {
	case receipts.RenderSubject:
		data, err = rel.RenderInput()
	case receipts.LockSubject:
		data, err = lock.DigestInput()
	default:
		for i, id := range rel.Inventory {
			if receipts.ObjectSubject(id) == name {
				data, err = rel.ObjectInput(i)
			}
		}
	}
	if err != nil || data == nil {
		t.Fatalf("subject %s of %s: %v", name, dir, err)
	}
	return testkit.WriteFile(t, filepath.Join(t.TempDir(), "subject"), data, 0o644)
}

// A signed install, upgrade and rollback each leave an attestation that
// `receipt audit` verifies against the release applied; cosign accepts
// the rollback's for the rendered release as applied (the file `render
// --subject kubectl-ql3/render/v1` writes), the receipt file, the lock and
// an object, and refuses it when a byte of the envelope's signature, of
// the payload or of the rendered release changed, or under another key.
func TestAttestedDeploymentCosign(t *testing.T) {
	ns := targetNamespace(t)
	v310, v311 := release(t, "v3.1.0", ns, ""), release(t, "v3.1.0", ns, "3.1.1")
	rdir := t.TempDir()
	o := signed(options(t, cluster(t, userConfig(t, "alice", "system:masters")), rdir))
	deployRelease(t, o, v310, deploy.TransitionInstall, deploy.ExpectedHead{})
	assertAttested(t, rdir, v310, 1)
	deployRelease(t, o, v311, deploy.TransitionUpgrade, headOf(t, ns).Expected())
	assertAttested(t, rdir, v311, 2)
	res := deployRelease(t, o, v310, deploy.TransitionRollback, headOf(t, ns).Expected())
	assertAttested(t, rdir, v310, 3)

	env := envelopeOf(res.Receipt)
	render := subjectFile(t, v310, receipts.RenderSubject)
	rel, err := inventory.Render(filesys.MakeFsOnDisk(), v310, inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cosignAccepts(t, env, render, res.Receipt, subjectFile(t, v310, receipts.LockSubject), subjectFile(t, v310, receipts.ObjectSubject(rel.Inventory[0])))

	var e struct {
		Payload     string `json:"payload"`
		PayloadType string `json:"payloadType"`
		Signatures  []struct {
			KeyID string `json:"keyid"`
			Sig   string `json:"sig"`
		} `json:"signatures"`
	}
	if err := json.Unmarshal(readFile(t, env), &e); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	write := func(name string, v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return testkit.WriteFile(t, filepath.Join(tmp, name), b, 0o644)
	}
	sigChanged := e
	sigChanged.Signatures = append(sigChanged.Signatures[:0:0], e.Signatures...)
	sigChanged.Signatures[0].Sig = map[bool]string{true: "B", false: "A"}[e.Signatures[0].Sig[0] == 'A'] + e.Signatures[0].Sig[1:]
	payload, _ := base64.StdEncoding.DecodeString(e.Payload)
	payloadChanged := e
	payloadChanged.Payload = base64.StdEncoding.EncodeToString(bytes.Replace(payload, []byte(`"kind":"rollback"`), []byte(`"kind":"upgrade"`), 1))
	renderChanged := readFile(t, render)
	renderChanged[len(renderChanged)-2] ^= 1
	pub := testkit.PublicKeyFile(t, filepath.Join(tmp, "receipt.pub"), attestKey)
	otherPub := testkit.PublicKeyFile(t, filepath.Join(tmp, "other.pub"), otherKey)
	const badSignature = "accepted signatures do not match threshold"
	for _, c := range []struct{ name, pub, envelope, subject, want string }{
		{"a byte of the envelope's signature", pub, write("sig.intoto.json", sigChanged), render, badSignature},
		{"a byte of the payload", pub, write("payload.intoto.json", payloadChanged), render, badSignature},
		{"a byte of the rendered release", pub, env, testkit.WriteFile(t, filepath.Join(tmp, "render"), renderChanged, 0o644), "no matching subject digest found"},
		{"another key", otherPub, env, render, badSignature},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, code := testkit.CosignVerifyAttestation(t, c.pub, receipts.PredicateType, c.envelope, c.subject)
			if code == 0 || strings.Contains(out, "Verified OK") || !strings.Contains(out, c.want) {
				t.Fatalf("cosign: exit %d, want a refusal saying %q\n%s", code, c.want, out)
			}
		})
	}
}

// A signed retire's receipt carries an attestation of the release it
// applied (the objects left; the retired ones are in the predicate, not
// subjects): the audit verifies it against that release, and cosign
// accepts it for the rendered release.
func TestAttestedRetire(t *testing.T) {
	ns := targetNamespace(t)
	rdir := t.TempDir()
	o := signed(options(t, cluster(t, userConfig(t, "alice", "system:masters")), rdir))
	h := installed(t, o, ns)
	v320 := retireRelease(t, ns)
	res := deployRelease(t, o, v320, deploy.TransitionRetire, h.Expected())
	if res.Transition != deploy.TransitionRetire || len(readReceipt(t, res.Receipt).Retired) != 2 {
		t.Fatalf("retire: %+v", res)
	}
	assertAttested(t, rdir, v320, 2)
	cosignAccepts(t, envelopeOf(res.Receipt), subjectFile(t, v320, receipts.RenderSubject), res.Receipt)
}

// A signed rollback that supersedes a generation stuck applying carries an
// attestation (its predicate lists the superseded generation): the audit
// verifies it against the release it applied, and cosign accepts it for
// the rendered release.
func TestAttestedSupersede(t *testing.T) {
	ns := targetNamespace(t)
	rdir := t.TempDir()
	o := signed(options(t, cluster(t, userConfig(t, "alice", "system:masters")), rdir))
	v300, _, stuck := stuckUpgrade(t, o, ns)
	pf, err := supersedePreflight(t, o, v300, deploy.TransitionRollback, stuck)
	if err != nil {
		t.Fatal(err)
	}
	res, err := deploy.RunApply(context.Background(), o, deploy.ApplyRequest{Preflight: pf.Record})
	if err != nil || res.Generation != 3 || len(readReceipt(t, res.Receipt).Transition.Supersedes) != 1 {
		t.Fatalf("superseding rollback: %+v %v", res, err)
	}
	assertAttested(t, rdir, v300, 2)
	cosignAccepts(t, envelopeOf(res.Receipt), subjectFile(t, v300, receipts.RenderSubject), res.Receipt)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
