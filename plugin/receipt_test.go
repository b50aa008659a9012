package plugin_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// receiptChain publishes n linked receipts into dir: an install of dep,
// then upgrades to 3.<g-1>.0 with the same inventory. It returns them.
// With a key each is signed and attested as applying rel.
func receiptChain(t *testing.T, dir string, n int, dep receipts.Deployment, inv []inventory.Identity, key ed25519.PrivateKey, rel *receipts.Rendered) []*receipts.Receipt {
	t.Helper()
	d := func(format string, args ...any) string {
		return inventory.DigestBytes("test", fmt.Appendf(nil, format, args...))
	}
	var out []*receipts.Receipt
	for g := int64(1); g <= int64(n); g++ {
		r := &receipts.Receipt{
			Schema:     receipts.Schema,
			Generation: g,
			Transition: receipts.Transition{Kind: receipts.KindInstall, CommandDigest: d("command %d", g), PreflightDigest: d("preflight %d", g)},
			Deployment: dep,
			Inventory:  inv,
			Head:       receipts.HeadRef{StateDigest: d("state %d", g)},
			Target:     receipts.Target{ClusterIdentity: d("cluster"), Namespace: "ql3-demo"},
			Tool:       receipts.Tool{Name: "kubectl-ql3", Version: "v0.1.0-test", FieldManager: "kubectl-ql3"},
			Steps:      receipts.Steps{DryRun: d("dry-run %d", g), Apply: d("apply %d", g), Converge: d("converge %d", g)},
			Flags:      receipts.ExpectedFlags,
		}
		if g > 1 {
			p := out[len(out)-1]
			prev := p.Deployment
			r.Transition.Kind = receipts.KindUpgrade
			r.PreviousDeployment, r.PreviousReceiptDigest = &prev, p.SelfDigest
			r.Deployment.Version = fmt.Sprintf("3.%d.0", g-1)
			r.Deployment.LockDigest = d("lock %d", g)
		}
		// The members a Head derives from the others (docs/receipts.md §2.4).
		id, err := receipts.IdentityStepDigest(r.Target.ClusterIdentity)
		if err != nil {
			t.Fatal(err)
		}
		r.Steps.Identity, r.Steps.FinalIdentity = id, id
		if r.Head.DeploymentDigest, err = receipts.DeploymentDigest(r.Generation, r.Transition, r.Deployment, r.PreviousDeployment, r.Target, r.Tool, r.PreviousReceiptDigest); err != nil {
			t.Fatal(err)
		}
		if err := r.Seal(); err != nil {
			t.Fatal(err)
		}
		if _, err := receipts.Publish(dir, r, key, rel); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func receiptTestInventory() ([]inventory.Identity, receipts.Deployment) {
	inv := []inventory.Identity{
		{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ql3-demo", Name: "ql3-control"},
		{APIVersion: "v1", Kind: "Namespace", Name: "ql3-demo"},
	}
	id, _ := inventory.InventoryDigest(inv)
	return inv, receipts.Deployment{Version: "3.0.0", LockDigest: inventory.DigestBytes("test", []byte("lock")), InventoryDigest: id, InventoryCount: len(inv)}
}

func writeReceiptPublicKey(t *testing.T, path string, k ed25519.PrivateKey) {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestReceiptAudit(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "receipts")
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	inv, dep := receiptTestInventory()
	fake := &receipts.Rendered{RenderDigest: inventory.DigestBytes("test", []byte("render"))}
	for _, id := range inv {
		fake.Objects = append(fake.Objects, receipts.RenderedObject{ID: id, Digest: inventory.DigestBytes("test", []byte(id.String()))})
	}
	rs := receiptChain(t, dir, 3, dep, inv, key, fake)
	pub := filepath.Join(base, "ops.pub")
	writeReceiptPublicKey(t, pub, key)
	other := filepath.Join(base, "other.pub")
	writeReceiptPublicKey(t, other, ed25519.NewKeyFromSeed([]byte(strings.Repeat("x", ed25519.SeedSize))))

	out, errOut, code := run(t, nil, "receipt", "audit", dir, "--trusted-key", pub)
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q\n%s", code, errOut, out)
	}
	for _, want := range []string{"FILE", "000003-upgrade-3.2.0.receipt.json", "verified", "chain: ok, generations 1 to 3", "verdict: ok", "does not prove that the Head is still"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}

	out, _, code = run(t, nil, "receipt", "audit", filepath.Join(dir, receipts.FileName(rs[2])), "--from-generation", "3", "-o", "json")
	var rep receipts.Report
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || !rep.OK() || len(rep.Receipts) != 1 || rep.Receipts[0].Signature != receipts.SignatureUnverified {
		t.Fatalf("json: exit %d\n%s", code, out)
	}

	out, errOut, code = run(t, nil, "receipt", "audit", dir, "--trusted-key", other)
	if code != 5 || !strings.Contains(out, "is not a trusted key") || !strings.Contains(errOut, "error: receipt audit failed: 3 of 3 receipts failed") {
		t.Fatalf("untrusted key: exit %d, stderr %q\n%s", code, errOut, out)
	}

	// One changed byte: the report is printed, then the exit is tamper.
	p := filepath.Join(dir, receipts.FileName(rs[1]))
	data, _ := os.ReadFile(p)
	if err := os.WriteFile(p, []byte(strings.Replace(string(data), `"forceConflicts":false`, `"forceConflicts":true `, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = run(t, nil, "receipt", "audit", dir, "-o", "yaml")
	if code != 5 || !strings.Contains(out, "verdict: FAIL") || !strings.Contains(errOut, "the chain is broken") {
		t.Fatalf("tampered: exit %d, stderr %q\n%s", code, errOut, out)
	}
}

func TestReceiptAuditErrors(t *testing.T) {
	base := t.TempDir()
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	inv, dep := receiptTestInventory()
	dir := filepath.Join(base, "receipts")
	receiptChain(t, dir, 1, dep, inv, nil, nil)
	priv := filepath.Join(base, "ops.key")
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	_ = os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no path", nil, "requires at least 1 arg"},
		{"missing path", []string{filepath.Join(base, "nope")}, "no such file"},
		{"empty directory", []string{base}, "no receipts"},
		{"from generation 0", []string{dir, "--from-generation", "0"}, "--from-generation 0"},
		{"output", []string{dir, "-o", "wide"}, `--output "wide"`},
		{"private key as trusted key", []string{dir, "--trusted-key", priv}, "is a private key"},
		{"secret flags without release", []string{dir, "--allow-secret-data"}, "only apply with --release"},
		{"release without lock", []string{dir, "--release", base}, "--release:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := run(t, nil, append([]string{"receipt", "audit"}, tt.args...)...)
			if code != 2 || !strings.Contains(errOut, tt.wantErr) {
				t.Fatalf("exit %d, stderr %q; want exit 2 and %q", code, errOut, tt.wantErr)
			}
		})
	}
}

// TestReceiptAuditRelease locks a fixture release offline and compares it
// with receipts naming it, and naming something else.
func TestReceiptAuditRelease(t *testing.T) {
	base := t.TempDir()
	rel := filepath.Join(base, "release")
	if err := os.CopyFS(rel, os.DirFS("../testdata/releases/v3.0.0")); err != nil {
		t.Fatal(err)
	}
	cluster := inventory.DigestBytes("test", []byte("cluster"))
	if _, errOut, code := run(t, nil, "lock", rel, "--version", "3.0.0", "--cluster-identity", cluster); code != 0 {
		t.Fatalf("lock: exit %d: %s", code, errOut)
	}
	r, lock, err := inventory.LoadRelease(filesys.MakeFsOnDisk(), rel, inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	lockDigest, err := lock.Digest()
	if err != nil {
		t.Fatal(err)
	}
	dep := receipts.Deployment{Version: "3.0.0", LockDigest: lockDigest, InventoryDigest: r.InventoryDigest, InventoryCount: len(r.Inventory)}

	good := filepath.Join(base, "good")
	receiptChain(t, good, 1, dep, r.Inventory, nil, nil)
	if out, errOut, code := run(t, nil, "receipt", "audit", good, "--release", rel); code != 0 || !strings.Contains(out, "release: ok") {
		t.Fatalf("matching release: exit %d, stderr %q\n%s", code, errOut, out)
	}

	// The newest receipt is an upgrade to another lock: the release is old.
	newer := filepath.Join(base, "newer")
	receiptChain(t, newer, 2, dep, r.Inventory, nil, nil)
	if out, _, code := run(t, nil, "receipt", "audit", newer, "--release", rel); code != 5 || !strings.Contains(out, "release lock digest") {
		t.Fatalf("older release: exit %d\n%s", code, out)
	}
}

// TestReceiptAuditReleaseSubjects attests a receipt of a fixture release
// and audits it against the release: accepted, and every subject's file
// as `kubectl ql3 render --subject` writes it hashes to the subject's
// digest; refused when the attestation, signed by the trusted key, states
// another render digest or another digest for one object.
func TestReceiptAuditReleaseSubjects(t *testing.T) {
	base := t.TempDir()
	rel := filepath.Join(base, "release")
	if err := os.CopyFS(rel, os.DirFS("../testdata/releases/v3.0.0")); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := run(t, nil, "lock", rel, "--version", "3.0.0", "--cluster-identity", inventory.DigestBytes("test", []byte("cluster"))); code != 0 {
		t.Fatalf("lock: exit %d: %s", code, errOut)
	}
	r, lock, err := inventory.LoadRelease(filesys.MakeFsOnDisk(), rel, inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	lockDigest, err := lock.Digest()
	if err != nil {
		t.Fatal(err)
	}
	dep := receipts.Deployment{Version: "3.0.0", LockDigest: lockDigest, InventoryDigest: r.InventoryDigest, InventoryCount: len(r.Inventory)}
	rendered, err := deploy.RenderedOf(r)
	if err != nil {
		t.Fatal(err)
	}
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	pub := filepath.Join(base, "ops.pub")
	writeReceiptPublicKey(t, pub, key)

	good := filepath.Join(base, "good")
	rc := receiptChain(t, good, 1, dep, r.Inventory, key, rendered)[0]
	if out, errOut, code := run(t, nil, "receipt", "audit", good, "--release", rel, "--trusted-key", pub); code != 0 || !strings.Contains(out, "release: ok") {
		t.Fatalf("matching release: exit %d, stderr %q\n%s", code, errOut, out)
	}
	env, err := os.ReadFile(filepath.Join(good, receipts.AttestationName(rc)))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := rc.Bytes()
	_, stated, err := receipts.CheckAttestation(env, rc, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	subs, _ := receipts.AttestationSubjects(rc, data, stated)
	for _, s := range subs[1:] {
		out, _ := runOK(t, "render", rel, "--subject", s.Name)
		if sum := sha256.Sum256([]byte(out)); hex.EncodeToString(sum[:]) != s.SHA256 {
			t.Errorf("render --subject %s: sha256 %x, subject %s", s.Name, sum, s.SHA256)
		}
	}

	for _, bad := range [][]string{{"--subject", "kubectl-ql3/object/v1//Namespace//nowhere"}, {"--subject", receipts.RenderSubject, "-o", "json"}} {
		if _, errOut, code := run(t, nil, append([]string{"render", rel}, bad...)...); code != 2 || !strings.Contains(errOut, "--subject") {
			t.Errorf("render %v: exit %d, want 2 naming --subject: %s", bad, code, errOut)
		}
	}

	for _, c := range []struct {
		name, want string
		change     func(*receipts.Rendered)
	}{
		{"another render digest", "release render digest", func(x *receipts.Rendered) { x.RenderDigest = lockDigest }},
		{"another object digest", "release object " + r.Inventory[1].String() + " has digest", func(x *receipts.Rendered) { x.Objects[1].Digest = lockDigest }},
	} {
		t.Run(c.name, func(t *testing.T) {
			other := *rendered
			other.Objects = slices.Clone(rendered.Objects)
			c.change(&other)
			dir := filepath.Join(t.TempDir(), "receipts")
			receiptChain(t, dir, 1, dep, r.Inventory, key, &other)
			if out, _, code := run(t, nil, "receipt", "audit", dir, "--trusted-key", pub); code != 0 {
				t.Fatalf("without --release: exit %d\n%s", code, out)
			}
			if out, _, code := run(t, nil, "receipt", "audit", dir, "--release", rel, "--trusted-key", pub); code != 5 || !strings.Contains(out, c.want) {
				t.Fatalf("exit %d, want 5 and %q\n%s", code, c.want, out)
			}
		})
	}
}
