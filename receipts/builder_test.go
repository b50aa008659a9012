package receipts

import (
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// td is a deterministic test digest.
func td(label string, args ...any) string {
	return canon.DigestBytes("test", fmt.Appendf(nil, label, args...))
}

// testInventory is n sorted, unique identities.
func testInventory(n int) []canon.Identity {
	kinds := []struct{ apiVersion, kind, ns string }{
		{"apps/v1", "Deployment", "ql3"},
		{"rbac.authorization.k8s.io/v1", "ClusterRole", ""},
		{"v1", "ConfigMap", "ql3"},
		{"v1", "Service", "ql3"},
	}
	ids := make([]canon.Identity, 0, n)
	for i := range n {
		k := kinds[i%len(kinds)]
		ids = append(ids, canon.Identity{APIVersion: k.apiVersion, Kind: k.kind, Namespace: k.ns, Name: fmt.Sprintf("obj-%05d", i)})
	}
	canon.SortIdentities(ids)
	return ids
}

// rb builds receipts for tests: newReceipt().inv(5).r is an unsealed
// generation-1 install; next() derives the following generation.
type rb struct{ r Receipt }

func newReceipt() *rb {
	b := &rb{r: Receipt{
		Schema:     Schema,
		Generation: 1,
		Transition: Transition{Kind: KindInstall, CommandDigest: td("command-1"), PreflightDigest: td("preflight-1")},
		Head:       HeadRef{DeploymentDigest: td("deployment-1"), StateDigest: td("state-1")},
		Target:     Target{ClusterIdentity: canon.ClusterIdentity("kube-system-uid"), Namespace: "ql3"},
		Tool:       Tool{Name: "kubectl-ql3", Version: "v3.0.0", FieldManager: "kubectl-ql3"},
		Steps: Steps{
			Identity: td("identity-1"), DryRun: td("dry-run-1"), Apply: td("apply-1"),
			Converge: td("converge-1"), FinalIdentity: td("final-identity-1"),
		},
		Flags: ExpectedFlags,
	}}
	return b.version("3.0.0").inv(3)
}

func (b *rb) version(v string) *rb {
	b.r.Deployment.Version = v
	b.r.Deployment.LockDigest = td("lock-%s", v)
	return b
}

func (b *rb) inv(n int) *rb {
	b.r.Inventory = testInventory(n)
	b.r.Deployment.InventoryCount = n
	b.r.Deployment.InventoryDigest, _ = canon.InventoryDigest(b.r.Inventory)
	return b
}

func (b *rb) with(f func(*Receipt)) *rb {
	f(&b.r)
	return b
}

func (b *rb) sealed(t testing.TB) *Receipt {
	t.Helper()
	r := b.r
	r.Inventory = slices.Clone(b.r.Inventory)
	if err := derive(&r); err != nil {
		t.Fatal(err)
	}
	if err := r.Seal(); err != nil {
		t.Fatalf("seal: %v", err)
	}
	return &r
}

// derive sets the members a Head computes from the others (§2.4), as the
// ceremony does: head.deploymentDigest and both identity steps.
func derive(r *Receipt) error {
	var err error
	if r.Head.DeploymentDigest, err = DeploymentDigest(r.Generation, r.Transition, r.Deployment, r.PreviousDeployment, r.Target, r.Tool, r.PreviousReceiptDigest); err != nil {
		return err
	}
	id, err := IdentityStepDigest(r.Target.ClusterIdentity)
	r.Steps.Identity, r.Steps.FinalIdentity = id, id
	return err
}

func mustBytes(t testing.TB, r *Receipt) []byte {
	t.Helper()
	b, err := r.Bytes()
	if err != nil {
		t.Fatalf("bytes: %v", err)
	}
	return b
}

// following starts the receipt after the sealed receipt p with the given
// transition kind; an upgrade moves to version v, a rollback returns to p's
// previous deployment.
func following(p *Receipt, kind, v string) *rb {
	g := p.Generation + 1
	b := &rb{r: *p}
	b.r.Inventory = slices.Clone(p.Inventory)
	b.r.Generation = g
	b.r.Transition = Transition{Kind: kind, CommandDigest: td("command-%d", g), PreflightDigest: td("preflight-%d", g)}
	b.r.Head = HeadRef{DeploymentDigest: td("deployment-%d", g), StateDigest: td("state-%d", g)}
	b.r.Steps = Steps{
		Identity: td("identity-%d", g), DryRun: td("dry-run-%d", g), Apply: td("apply-%d", g),
		Converge: td("converge-%d", g), FinalIdentity: td("final-identity-%d", g),
	}
	prev := p.Deployment
	b.r.PreviousDeployment = &prev
	b.r.PreviousReceiptDigest = p.SelfDigest
	b.r.SelfDigest = ""
	b.r.Retired = nil
	switch kind {
	case KindRollback:
		b.r.Deployment = *p.PreviousDeployment
	default:
		b.version(v)
	}
	return b
}

// chain is n linked receipts with invSize identities each: an install, then
// upgrades, with a rollback at generation 4 when n allows.
func chain(t testing.TB, n, invSize int) []*Receipt {
	t.Helper()
	rs := []*Receipt{newReceipt().inv(invSize).sealed(t)}
	for g := 2; g <= n; g++ {
		p := rs[len(rs)-1]
		kind := KindUpgrade
		if g == 4 {
			kind = KindRollback
		}
		rs = append(rs, following(p, kind, fmt.Sprintf("3.%d.0", g-1)).sealed(t))
	}
	return rs
}

// writeChain writes receipts into dir under their file names, and returns
// the paths.
func writeChain(t testing.TB, dir string, rs []*Receipt) []string {
	t.Helper()
	var paths []string
	for _, r := range rs {
		p := filepath.Join(dir, FileName(r))
		if err := os.WriteFile(p, mustBytes(t, r), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// testKey is a fixed Ed25519 key (seed byte b repeated).
func testKey(b byte) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = b
	}
	return ed25519.NewKeyFromSeed(seed)
}

// forge seals r bypassing validation: selfDigest recomputed, nothing
// checked. It is what an attacker able to compute digests could write.
func forge(t testing.TB, r *Receipt) []byte {
	t.Helper()
	d, err := r.selfDigest()
	if err != nil {
		t.Fatal(err)
	}
	r.SelfDigest = d
	b, err := r.canonical()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type ed25519PublicKey = ed25519.PublicKey

func canonicalJSON(v any) ([]byte, error) { return canon.Canonical(v) }
