package canon_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/testkit"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// TestReleaseBounds: a release at each bound passes, one byte over it is
// refused with its count, its size and the bound named.
func TestReleaseBounds(t *testing.T) {
	packed := func(b canon.ReleaseBounds) int { return b.Packed }
	listed := func(b canon.ReleaseBounds) int { return b.Listed }
	for _, c := range []struct {
		what       string
		bound      int
		serialLast bool
		measure    func(canon.ReleaseBounds) int
	}{
		{"the Head", canon.MaxPackedInventoryBytes, false, packed},
		{"a receipt", canon.MaxInventoryBytes, true, listed},
	} {
		at := testkit.SizedInventory(t, "fill", c.bound, c.serialLast, c.measure)
		if err := canon.CheckReleaseBounds(at); err != nil {
			t.Fatalf("%s: a release at the bound (%d objects) is refused: %v", c.what, len(at), err)
		}
		// One byte over: the last name one character longer (built once:
		// a receipt-bound inventory is ~15 MB, slow to size under -race).
		over := slices.Clone(at)
		over[len(over)-1].Name += "y"
		err := canon.CheckReleaseBounds(over)
		want := fmt.Sprintf("a release of %d objects is too large for %s", len(over), c.what)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fmt.Sprintf("%d bytes, over the bound of %d bytes", c.bound+1, c.bound)) {
			t.Fatalf("%s: one byte over the bound: %v", c.what, err)
		}
		t.Logf("%s: %d objects at the bound pass; %v", c.what, len(at), err)
	}
}
