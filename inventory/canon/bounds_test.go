package canon

import (
	"fmt"
	"strings"
	"testing"
)

// SizedInventory is an inventory of ConfigMaps in namespace "fill" whose
// size measure(ids) is exactly target: names of prefix-then-serial (or
// serial-then-padding) form, the last one lengthened character by
// character (each adds one byte to both sizes).
func sizedInventory(t *testing.T, target int, serialLast bool, measure func(ReleaseBounds) int) []Identity {
	t.Helper()
	name := func(i int) string {
		if serialLast {
			return strings.Repeat("x", 240) + fmt.Sprintf("%06d", i)
		}
		return fmt.Sprintf("%06d-", i) + strings.Repeat("x", 93)
	}
	size := func(ids []Identity) int {
		b, err := MeasureRelease(ids)
		if err != nil {
			t.Fatal(err)
		}
		return measure(b)
	}
	fill := func(n int) []Identity {
		ids := make([]Identity, n)
		for i := range ids {
			ids[i] = Identity{APIVersion: "v1", Kind: "ConfigMap", Namespace: "fill", Name: name(i)}
		}
		return ids
	}
	// Start from an estimate by the size per object, then step by whole
	// objects until the last can be padded (by less than one object's size).
	per := size(fill(1000)) / 1000
	ids := fill(target / per)
	for s := size(ids); s > target || target-s > per; s = size(ids) {
		ids = fill(len(ids) + (target-s)/per - 1)
	}
	ids[len(ids)-1].Name += strings.Repeat("y", target-size(ids))
	if got := size(ids); got != target {
		t.Fatalf("sized inventory is %d bytes, want %d", got, target)
	}
	return ids
}

// TestReleaseBounds: a release at each bound passes, one byte over it is
// refused with its count, its size and the bound named.
func TestReleaseBounds(t *testing.T) {
	packed := func(b ReleaseBounds) int { return b.Packed }
	listed := func(b ReleaseBounds) int { return b.Listed }
	for _, c := range []struct {
		what       string
		bound      int
		serialLast bool
		measure    func(ReleaseBounds) int
	}{
		{"the Head", MaxPackedInventoryBytes, false, packed},
		{"a receipt", MaxInventoryBytes, true, listed},
	} {
		at := sizedInventory(t, c.bound, c.serialLast, c.measure)
		if err := CheckReleaseBounds(at); err != nil {
			t.Fatalf("%s: a release at the bound (%d objects) is refused: %v", c.what, len(at), err)
		}
		over := sizedInventory(t, c.bound+1, c.serialLast, c.measure)
		err := CheckReleaseBounds(over)
		want := fmt.Sprintf("a release of %d objects is too large for %s", len(over), c.what)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fmt.Sprintf("%d bytes, over the bound of %d bytes", c.bound+1, c.bound)) {
			t.Fatalf("%s: one byte over the bound: %v", c.what, err)
		}
		t.Logf("%s: %d objects at the bound pass; %v", c.what, len(at), err)
	}
}
