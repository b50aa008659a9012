package canon

import "fmt"

// The largest release the formats hold (docs/head.md §2.2). The Head's
// head.json is at most HeadJSONMaxBytes, of which HeadReserveBytes are kept
// for everything but the inventory (versions, digests, a supersedes list,
// an approval, a retired list); a receipt is at most ReceiptMaxBytes, of
// which ReceiptReserveBytes are kept for everything but its inventory
// (which is at most a head.json's worth). The preflight record holds no
// inventory.
const (
	HeadJSONMaxBytes        = 900 << 10
	HeadReserveBytes        = 64 << 10
	MaxPackedInventoryBytes = HeadJSONMaxBytes - HeadReserveBytes
	ReceiptMaxBytes         = 16 << 20
	ReceiptReserveBytes     = 1 << 20
	MaxInventoryBytes       = ReceiptMaxBytes - ReceiptReserveBytes
)

// ReleaseBounds are an inventory's two sizes the bounds limit: its packed
// form as the Head stores it (the canonical JSON of PackInventory) and its
// canonical JSON array as receipts list it.
type ReleaseBounds struct {
	Count, Packed, Listed int
}

// MeasureRelease measures a sorted inventory.
func MeasureRelease(ids []Identity) (ReleaseBounds, error) {
	if ids == nil {
		ids = []Identity{}
	}
	packed, err := Canonical(PackInventory(ids))
	if err != nil {
		return ReleaseBounds{}, err
	}
	listed, err := Canonical(ids)
	if err != nil {
		return ReleaseBounds{}, err
	}
	return ReleaseBounds{Count: len(ids), Packed: len(packed), Listed: len(listed)}, nil
}

// CheckReleaseBounds refuses a sorted inventory too large for the Head or a
// receipt to hold, naming its count, the size and the bound.
func CheckReleaseBounds(ids []Identity) error {
	b, err := MeasureRelease(ids)
	if err != nil {
		return err
	}
	if b.Packed > MaxPackedInventoryBytes {
		return fmt.Errorf("a release of %d objects is too large for the Head: its inventory packs to %d bytes, over the bound of %d bytes (docs/head.md §2.2); split it into releases with a control namespace each, or shorten object names", b.Count, b.Packed, MaxPackedInventoryBytes)
	}
	if b.Listed > MaxInventoryBytes {
		return fmt.Errorf("a release of %d objects is too large for a receipt: its inventory, listed as receipts list it, is %d bytes, over the bound of %d bytes (docs/head.md §2.2); split it into releases with a control namespace each", b.Count, b.Listed, MaxInventoryBytes)
	}
	return nil
}
