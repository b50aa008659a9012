package canon

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// tenThousand is a release of 10,001 objects as a platform team writes one:
// 70% ConfigMaps, 10% Services, ServiceAccounts and Deployments, in one
// 20-character namespace, names <team>-<app>-<component>-config-<suffix>
// of about 40 characters; the suffix is a serial number, or (hashed) ten
// random characters of a kustomize name hash.
func tenThousand(hashed bool) []Identity {
	r := rand.New(rand.NewSource(1))
	teams := []string{"payments-core", "ledger", "checkout-web", "identity", "search-idx"}
	apps := []string{"gateway", "reconciler", "billing", "notifier"}
	comps := []string{"api", "worker", "cron", "ingest", "export"}
	var ids []Identity
	for _, k := range []struct {
		apiVersion, kind string
		n                int
	}{{"v1", "ConfigMap", 7001}, {"v1", "Service", 1000}, {"v1", "ServiceAccount", 1000}, {"apps/v1", "Deployment", 1000}} {
		for i := range k.n {
			suffix := fmt.Sprintf("%05d", i)
			if hashed {
				b := make([]byte, 10)
				for j := range b {
					b[j] = "bcdfghkmt2456789"[r.Intn(16)]
				}
				suffix = string(b)
			}
			name := fmt.Sprintf("%s-%s-%s-config-%s", teams[i%5], apps[(i/5)%4], comps[(i/20)%5], suffix)
			ids = append(ids, Identity{APIVersion: k.apiVersion, Kind: k.kind, Namespace: "payments-platform-pr", Name: name})
		}
	}
	SortIdentities(ids)
	return ids
}

// TestPackInventory: packing a 10k release and unpacking it gives it back,
// and the packed form is a tenth (serial names) to a seventh (hashed) of
// the listed one: the figures docs/head.md §2.2 quotes.
func TestPackInventory(t *testing.T) {
	for _, c := range []struct {
		hashed         bool
		packed, listed int
	}{{false, 117850, 1227123}, {true, 179319, 1277128}} {
		ids := tenThousand(c.hashed)
		back, err := UnpackInventory(PackInventory(ids))
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(back) != fmt.Sprint(ids) {
			t.Fatalf("hashed=%v: unpacking does not give the inventory back", c.hashed)
		}
		b, err := MeasureRelease(ids)
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
	ids := []Identity{{"v1", "ConfigMap", "ns", "café-a"}, {"v1", "ConfigMap", "ns", "café-b"}, {"v1", "ConfigMap", "ns", "cafë"}}
	got, err := Canonical(PackInventory(ids))
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
	g := func(av, ns string, names ...FrontCoded) InventoryGroup {
		return InventoryGroup{APIVersion: av, Kind: "ConfigMap", Namespace: ns, Names: names}
	}
	for name, c := range map[string]struct {
		groups []InventoryGroup
		err    string
	}{
		"no names":           {[]InventoryGroup{g("v1", "ns")}, "has no names"},
		"group split":        {[]InventoryGroup{g("v1", "ns", FrontCoded{0, "a"}), g("v1", "ns", FrontCoded{0, "b"})}, "one run is one group"},
		"first shares":       {[]InventoryGroup{g("v1", "ns", FrontCoded{1, "a"})}, "outside 0..0"},
		"shared too long":    {[]InventoryGroup{g("v1", "ns", FrontCoded{0, "ab"}, FrontCoded{3, "c"})}, "outside 0..2"},
		"shared negative":    {[]InventoryGroup{g("v1", "ns", FrontCoded{0, "ab"}, FrontCoded{-1, "c"})}, "outside 0..2"},
		"shared not longest": {[]InventoryGroup{g("v1", "ns", FrontCoded{0, "ab"}, FrontCoded{0, "ac"})}, "longest common prefix"},
		"empty suffix":       {[]InventoryGroup{g("v1", "ns", FrontCoded{0, "ab"}, FrontCoded{2, ""})}, "suffix is empty"},
	} {
		if _, err := UnpackInventory(c.groups); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want %q", name, err, c.err)
		}
	}
}
