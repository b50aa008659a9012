package deploy_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// Note: this package's TestMain starts a control plane, even for
// `go test -run '^$' -bench .`; the benchmarks themselves touch no cluster.

// committedHead is a sealed, committed upgrade Head whose inventory has n
// objects, as apply writes it for a release of n objects.
func committedHead(b *testing.B, n int) *deploy.Head {
	b.Helper()
	d := func(s string) string { return inventory.DigestPrefix + strings.Repeat(s, 64) }
	ids := make([]inventory.Identity, n)
	for i := range ids {
		ids[i] = inventory.Identity{APIVersion: "v1", Kind: "ConfigMap", Namespace: "bench", Name: fmt.Sprintf("cm-%05d", i)}
	}
	inventory.SortIdentities(ids)
	invDigest, err := inventory.InventoryDigest(ids)
	if err != nil {
		b.Fatal(err)
	}
	h := &deploy.Head{
		Schema:     deploy.HeadSchema,
		Phase:      deploy.PhaseCommitted,
		Generation: 2,
		Transition: deploy.HeadTransition{
			Transition: receipts.Transition{Kind: deploy.TransitionUpgrade, CommandDigest: d("1"), PreflightDigest: d("2")},
			MutationID: strings.Repeat("ab", 16),
		},
		Current: deploy.HeadDeployment{
			Deployment: receipts.Deployment{Version: "1.1.0", LockDigest: d("3"), InventoryDigest: invDigest, InventoryCount: n},
			Inventory:  ids,
		},
		Previous:              &receipts.Deployment{Version: "1.0.0", LockDigest: d("4"), InventoryDigest: invDigest, InventoryCount: n},
		Target:                receipts.Target{ClusterIdentity: d("5"), Namespace: "bench"},
		Tool:                  receipts.Tool{Name: deploy.ToolName, Version: "v0.1.0", FieldManager: "kubectl-ql3"},
		Steps:                 receipts.Steps{Identity: d("6"), DryRun: d("7"), Apply: d("8"), Converge: d("9"), FinalIdentity: d("6")},
		PreviousReceiptDigest: d("a"),
	}
	if err := h.Seal(); err != nil {
		b.Fatal(err)
	}
	return h
}

// BenchmarkHeadSeal is the three Head digests (deployment, state, self)
// over a 3,000-object inventory; apply seals twice (applying, committed).
func BenchmarkHeadSeal(b *testing.B) {
	h := committedHead(b, 3000)
	for b.Loop() {
		if err := h.Seal(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseHeadConfigMap is every read of a Head with a
// 3,000-object inventory: strict parse, canonical form, every rule and
// digest (preflight, apply and each settle read do it).
func BenchmarkParseHeadConfigMap(b *testing.B) {
	cm, err := committedHead(b, 3000).ConfigMap("bench")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(cm.Data[deploy.HeadKey])))
	for b.Loop() {
		if _, err := deploy.ParseHeadConfigMap(cm); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReceiptFromHead rebuilds the receipt of a committed Head with a
// 3,000-object inventory (apply does it for the new Head and the previous).
func BenchmarkReceiptFromHead(b *testing.B) {
	h := committedHead(b, 3000)
	for b.Loop() {
		if _, err := deploy.ReceiptFromHead(h); err != nil {
			b.Fatal(err)
		}
	}
}
