package inventory

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// TestLockRefusesAReleaseOverTheHeadBound: `kubectl ql3 lock` (NewLock)
// locks a release whose inventory packs to exactly the Head's bound, and
// refuses one a byte over it — invalid, naming the count, the size and the
// bound — so no such release ever reaches preflight or apply.
func TestLockRefusesAReleaseOverTheHeadBound(t *testing.T) {
	base := mustRender(t, fixtureFS(t, "v3.0.0"), Options{})
	own, err := canon.MeasureRelease(base.Inventory)
	if err != nil {
		t.Fatal(err)
	}
	packed := func(b canon.ReleaseBounds) int { return b.Packed }
	for _, size := range []int{canon.MaxPackedInventoryBytes, canon.MaxPackedInventoryBytes + 1} {
		// The filler is one more group: the packed array grows by its
		// group and a comma, less the filler's own brackets.
		filler := testkit.SizedInventory(t, "zz-filler", size-own.Packed+1, false, packed)
		r := *base
		r.Inventory = append(slices.Clone(base.Inventory), filler...)
		SortIdentities(r.Inventory)
		if r.InventoryDigest, err = InventoryDigest(r.Inventory); err != nil {
			t.Fatal(err)
		}
		if b, _ := canon.MeasureRelease(r.Inventory); b.Packed != size {
			t.Fatalf("the release packs to %d bytes, want %d", b.Packed, size)
		}
		_, err := NewLock(&r, "3.0.0", testClusterIdentity, "v0.1.0")
		if size == canon.MaxPackedInventoryBytes {
			if err != nil {
				t.Fatalf("a release of %d objects at the bound: %v", len(r.Inventory), err)
			}
			continue
		}
		want := fmt.Sprintf("a release of %d objects is too large for the Head: its inventory packs to %d bytes, over the bound of %d bytes", len(r.Inventory), size, canon.MaxPackedInventoryBytes)
		if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), want) {
			t.Fatalf("a release a byte over the bound: %v, want invalid %q", err, want)
		}
	}
}
