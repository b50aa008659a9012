package canon_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/testkit"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// TestPackInventory: packing a 10k release and unpacking it gives it back,
// and the packed form is a tenth (serial names) to a seventh (hashed) of
// the listed one: the figures docs/head.md §2.2 quotes.
func TestPackInventory(t *testing.T) {
	for _, c := range []struct {
		hashed         bool
		packed, listed int
	}{{false, 117850, 1227123}, {true, 179319, 1277128}} {
		ids := testkit.TenThousand(c.hashed)
		back, err := canon.UnpackInventory(canon.PackInventory(ids))
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(back) != fmt.Sprint(ids) {
			t.Fatalf("hashed=%v: unpacking does not give the inventory back", c.hashed)
		}
		b, err := canon.MeasureRelease(ids)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("hashed=%v: %d objects, packed %d bytes, listed %d bytes", c.hashed, b.Count, b.Packed, b.Listed)
		if b.Packed != c.packed || b.Listed != c.listed {
			t.Errorf("hashed=%v: packed %d, listed %d bytes; the doc says %d, %d", c.hashed, b.Packed, b.Listed, c.packed, c.listed)
		}
	}
}

// TestPackInventoryCharacters: shared prefixes count characters (code
// points), so a suffix never starts inside a multi-byte character.
func TestPackInventoryCharacters(t *testing.T) {
	ids := []canon.Identity{{"v1", "ConfigMap", "ns", "café-a"}, {"v1", "ConfigMap", "ns", "café-b"}, {"v1", "ConfigMap", "ns", "cafë"}}
	got, err := canon.Canonical(canon.PackInventory(ids))
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"apiVersion":"v1","kind":"ConfigMap","names":[[0,"café-a"],[5,"b"],[3,"ë"]],"namespace":"ns"}]`
	if string(got) != want {
		t.Fatalf("packed\n%s\nwant\n%s", got, want)
	}
}

// TestUnpackInventoryRules: each rule of a packed inventory broken once.
func TestUnpackInventoryRules(t *testing.T) {
	g := func(av, ns string, names ...canon.FrontCoded) canon.InventoryGroup {
		return canon.InventoryGroup{APIVersion: av, Kind: "ConfigMap", Namespace: ns, Names: names}
	}
	for name, c := range map[string]struct {
		groups []canon.InventoryGroup
		err    string
	}{
		"no names":           {[]canon.InventoryGroup{g("v1", "ns")}, "has no names"},
		"group split":        {[]canon.InventoryGroup{g("v1", "ns", canon.FrontCoded{0, "a"}), g("v1", "ns", canon.FrontCoded{0, "b"})}, "one run is one group"},
		"first shares":       {[]canon.InventoryGroup{g("v1", "ns", canon.FrontCoded{1, "a"})}, "outside 0..0"},
		"shared too long":    {[]canon.InventoryGroup{g("v1", "ns", canon.FrontCoded{0, "ab"}, canon.FrontCoded{3, "c"})}, "outside 0..2"},
		"shared negative":    {[]canon.InventoryGroup{g("v1", "ns", canon.FrontCoded{0, "ab"}, canon.FrontCoded{-1, "c"})}, "outside 0..2"},
		"shared not longest": {[]canon.InventoryGroup{g("v1", "ns", canon.FrontCoded{0, "ab"}, canon.FrontCoded{0, "ac"})}, "longest common prefix"},
		"empty suffix":       {[]canon.InventoryGroup{g("v1", "ns", canon.FrontCoded{0, "ab"}, canon.FrontCoded{2, ""})}, "suffix is empty"},
	} {
		if _, err := canon.UnpackInventory(c.groups); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want %q", name, err, c.err)
		}
	}
}
