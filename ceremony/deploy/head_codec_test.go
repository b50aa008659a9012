package deploy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// upgradeHead is a committed upgrade Head whose inventory is inv.
func upgradeHead(t testing.TB, inv []inventory.Identity) *Head {
	t.Helper()
	prev := dep("3.0.0", 'p', inv)
	return committedHead(t, 2, dep("3.1.0", 'q', inv), inv, &prev)
}

// storedText is cm's stored head.json, which must be compressed.
func storedText(t *testing.T, cm *corev1.ConfigMap) []byte {
	t.Helper()
	text, compressed, err := StoredHeadJSON(cm)
	if err != nil || !compressed {
		t.Fatalf("head.json not compressed (%v): binaryData %d keys", err, len(cm.BinaryData))
	}
	return text
}

// apiSize is cm's size as the API returns it: its JSON (docs/head.md §2.2).
func apiSize(t *testing.T, cm *corev1.ConfigMap) int {
	t.Helper()
	api, err := json.Marshal(cm)
	if err != nil {
		t.Fatal(err)
	}
	return len(api)
}

// storedSchema is the schema member of stored head.json.
func storedSchema(t *testing.T, data []byte) string {
	t.Helper()
	var s struct{ Schema string }
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return s.Schema
}

// TestHeadStoredForms: a small Head is stored in v1 byte for byte as before
// (its logical document); a Head of a 10k release with realistic names is
// stored in v2 within 256 KiB, its ConfigMap labelled v2, and reads back as
// the same logical Head with the same digests, which are its v1 twin's.
func TestHeadStoredForms(t *testing.T) {
	t.Parallel() // pure: runs while the package's cluster tests wait on the API server
	small := upgradeHead(t, ids("a", "b"))
	data, err := small.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if logical, _ := inventory.Canonical(small); string(data) != string(logical) || storedSchema(t, data) != HeadSchema {
		t.Fatalf("a small Head is not stored as its v1 document")
	}
	for _, hashed := range []bool{false, true} {
		h := upgradeHead(t, testkit.TenThousand(hashed))
		cm, err := h.ConfigMap("ns")
		if err != nil {
			t.Fatal(err)
		}
		stored := storedText(t, cm)
		twin, _ := inventory.Canonical(h)
		api := apiSize(t, cm)
		t.Logf("hashed=%v: head.json %d bytes stored (v2, compressed: the ConfigMap %d bytes), %d bytes as v1", hashed, len(stored), api, len(twin))
		if storedSchema(t, stored) != HeadSchemaV2 || cm.Labels[LabelHeadSchema] != LabelHeadSchemaValueV2 || api > 256<<10 {
			t.Fatalf("hashed=%v: stored as %s (label %s), the ConfigMap %d bytes: want v2 within 256 KiB", hashed, storedSchema(t, stored), cm.Labels[LabelHeadSchema], api)
		}
		got, err := ParseHeadConfigMap(cm)
		if err != nil {
			t.Fatal(err)
		}
		if back, _ := inventory.Canonical(got); string(back) != string(twin) || got.SelfDigest != h.SelfDigest || got.StateDigest != h.StateDigest {
			t.Fatalf("hashed=%v: the v2 Head does not read back as its logical Head", hashed)
		}
	}
}

// TestHeadV1StillRead: a v1 Head of 10,001 short-named objects, as the
// first format wrote it (805 KB), is still read, and its next write is v2.
func TestHeadV1StillRead(t *testing.T) {
	t.Parallel() // pure: runs while the package's cluster tests wait on the API server
	h := upgradeHead(t, testkit.ShortNames("ns"))
	v1, err := h.encode(HeadSchema)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseHead(v1)
	if err != nil || got.SelfDigest != h.SelfDigest {
		t.Fatalf("a %d-byte v1 Head is refused: %v", len(v1), err)
	}
	v2, err := got.Bytes()
	if err != nil || storedSchema(t, v2) != HeadSchemaV2 {
		t.Fatalf("its next write is not v2: %v", err)
	}
	t.Logf("10,001 short names: v1 %d bytes, v2 %d bytes", len(v1), len(v2))
}

// TestHeadV2Rules: each rule of the v2 form broken once is tamper.
func TestHeadV2Rules(t *testing.T) {
	t.Parallel() // pure: runs while the package's cluster tests wait on the API server
	h := upgradeHead(t, ids("a-1", "a-2", "b"))
	v2, err := h.encode(HeadSchemaV2)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ from, to, err string }{
		"shared not longest":    {`[2,"2"]`, `[0,"a-2"]`, "longest common prefix"},
		"empty suffix":          {`[2,"2"]`, `[3,""]`, "suffix is empty"},
		"inventory listed too":  {`"inventoryGroups"`, `"inventory":[],"inventoryGroups"`, "unknown field"},
		"names not an array":    {`[0,"b"]`, `"b"`, "[shared"},
		"group split":           {`,[0,"b"]],"namespace":"ns"}`, `],"namespace":"ns"},{"apiVersion":"v1","kind":"ConfigMap","names":[[0,"b"]],"namespace":"ns"}`, "one run is one group"},
		"out of order":          {`,[0,"b"]],"namespace":"ns"}`, `],"namespace":"ns"},{"apiVersion":"v1","kind":"ConfigMap","names":[[0,"b"]],"namespace":"a"}`, "out of order"},
		"inventoryGroups null":  {`"inventoryGroups":[{"apiVersion":"v1","kind":"ConfigMap","names":[[0,"a-1"],[2,"2"],[0,"b"]],"namespace":"ns"}]`, `"inventoryGroups":null`, "missing or null"},
		"schema v1 with groups": {HeadSchemaV2, HeadSchema, "unknown field"},
	} {
		bad := strings.Replace(string(v2), c.from, c.to, 1)
		if bad == string(v2) {
			t.Fatalf("%s: %q not in %s", name, c.from, v2)
		}
		_, err := ParseHead([]byte(bad))
		if !fail.Is(err, fail.Tamper) || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want tamper %q", name, err, c.err)
		}
	}
	cm, err := h.ConfigMap("ns")
	if err != nil {
		t.Fatal(err)
	}
	cm.Data[HeadKey], cm.Labels[LabelHeadSchema] = string(v2), LabelHeadSchemaValue
	if _, err := ParseHeadConfigMap(cm); !fail.Is(err, fail.Tamper) || !strings.Contains(err.Error(), "labels must be exactly") {
		t.Errorf("a v2 head.json under the v1 label: %v", err)
	}
}

// boundLoaded is a release of inventory inv as preflight loads it.
func boundLoaded(inv []inventory.Identity) *loaded {
	digest, _ := inventory.InventoryDigest(inv)
	return &loaded{
		release:    &inventory.Release{Inventory: inv, InventoryDigest: digest},
		lock:       &inventory.Lock{Release: inventory.LockRelease{Version: "3.2.0"}, Target: inventory.LockTarget{ClusterIdentity: d('1'), Namespace: "ns"}},
		lockDigest: d('l'),
	}
}

// TestCheckHeadFits: the preflight's bound agrees with the lock's — an
// upgrade to a release at the lock's bound, under the two-person rule,
// leads to a Head that fits — and refuses a retire whose retired list
// would not fit, before any record is written.
func TestCheckHeadFits(t *testing.T) {
	t.Parallel() // pure: runs while the package's cluster tests wait on the API server
	inv := testkit.SizedInventory(t, "ns", canon.MaxPackedInventoryBytes, false, func(b canon.ReleaseBounds) int { return b.Packed })
	prev := upgradeHead(t, inv[:len(inv)-1])
	o := &Options{ToolVersion: "v0.1.0"}
	rec := &PreflightRecord{Command: Command{Transition: TransitionUpgrade, Version: "3.2.0", FieldManager: "kubectl-ql3", Approval: ApprovalTwoPerson},
		Steps: PreflightSteps{Identity: d('2'), DryRun: d('3')}, Proposer: "alice@example.com"}
	if err := o.checkHeadFits(prev, boundLoaded(inv), rec); err != nil {
		t.Fatalf("a release at the lock's bound: %v", err)
	}
	kept := inv[:len(inv)/2]
	retire := *rec
	retire.Command.Transition = TransitionRetire
	for _, id := range inv[len(inv)/2:] {
		retire.Retired = append(retire.Retired, receipts.Retired{ID: id, UID: strings.Repeat("u", 36), ResourceVersion: "123456", ReviewedDigest: d('v'), Outcome: receipts.OutcomePending})
	}
	err := o.checkHeadFits(upgradeHead(t, inv), boundLoaded(kept), &retire)
	want := fmt.Sprintf("(%d objects, %d retired), over the %d-byte bound", len(kept), len(retire.Retired), HeadMaxBytes)
	if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), want) {
		t.Fatalf("a retire of %d objects: %v, want invalid %q", len(retire.Retired), err, want)
	}
}

// TestHeadFormThreshold: a Head whose v1 text is exactly HeadV1MaxBytes is
// stored as v1, one a byte longer as v2.
func TestHeadFormThreshold(t *testing.T) {
	t.Parallel() // pure: runs while the package's cluster tests wait on the API server
	names := make([]string, 600)
	for i := range names {
		names[i] = fmt.Sprintf("cm-%04d", i)
	}
	base, err := upgradeHead(t, ids(names...)).encode(HeadSchema)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{HeadV1MaxBytes, HeadV1MaxBytes + 1} {
		inv := ids(names...)
		inv[len(inv)-1].Name += strings.Repeat("z", size-len(base))
		h := upgradeHead(t, inv)
		v1, _ := h.encode(HeadSchema)
		data, err := h.Bytes()
		if err != nil || len(v1) != size {
			t.Fatalf("v1 text %d bytes, want %d: %v", len(v1), size, err)
		}
		want := HeadSchema
		if size > HeadV1MaxBytes {
			want = HeadSchemaV2
		}
		if got := storedSchema(t, data); got != want {
			t.Errorf("a Head of %d bytes as v1 is stored as %s, want %s", size, got, want)
		}
	}
}

// tenThousandRetireHead is a committed retire Head of the 10k release with realistic
// names (hashed or serial) that retired every tenth object: 1,000 retired,
// each with a UID and a reviewed digest as random as the API server's.
func tenThousandRetireHead(t *testing.T, hashed bool) *Head {
	t.Helper()
	all := testkit.TenThousand(hashed)
	var kept []inventory.Identity
	var retired []receipts.Retired
	for i, id := range all {
		if i%10 != 9 {
			kept = append(kept, id)
			continue
		}
		sum := sha256.Sum256(fmt.Appendf(nil, "retired %d", i))
		x := hex.EncodeToString(sum[:])
		retired = append(retired, receipts.Retired{ID: id, UID: x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32],
			ResourceVersion: fmt.Sprint(4_100_000 + i), ReviewedDigest: inventory.DigestPrefix + x, Outcome: receipts.OutcomeDeleted})
	}
	prev := dep("3.0.0", 'p', all)
	h := committedHead(t, 2, dep("3.1.0", 'q', kept), kept, &prev)
	h.Transition.Kind, h.Retired = TransitionRetire, retired
	if err := h.Seal(); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestHeadV2PacksRetired: a retire of 1,000 of the 10k release with
// realistic names stores each retired object in at most 170 bytes of
// head.json (v2 packs the retired identities as it packs the inventory,
// the states beside them; listed, each took about 300), its ConfigMap,
// head.json compressed, is within 256 KiB, and the stored Head reads back
// as its logical Head, digests and all.
func TestHeadV2PacksRetired(t *testing.T) {
	t.Parallel() // pure: runs while the package's cluster tests wait on the API server
	for _, hashed := range []bool{false, true} {
		h := tenThousandRetireHead(t, hashed)
		cm, err := h.ConfigMap("ns")
		if err != nil {
			t.Fatal(err)
		}
		stored := storedText(t, cm)
		without := *h
		without.Retired = nil
		rest, err := without.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		twin, _ := inventory.Canonical(h)
		api := apiSize(t, cm)
		per := float64(len(stored)-len(rest)) / float64(len(h.Retired))
		t.Logf("hashed=%v, %d objects, %d retired: head.json %d bytes stored (v2; %.1f bytes per retired object; compressed, the ConfigMap %d bytes), %d bytes as v1", hashed, len(h.Current.Inventory), len(h.Retired), len(stored), per, api, len(twin))
		if storedSchema(t, stored) != HeadSchemaV2 || per > 170 || strings.Contains(string(stored), `"retired"`) || api > 256<<10 {
			t.Fatalf("hashed=%v: stored as %s, %.1f bytes per retired object, the ConfigMap %d bytes: want v2, its retired list packed, at most 170 bytes each, within 256 KiB", hashed, storedSchema(t, stored), per, api)
		}
		got, err := ParseHeadConfigMap(cm)
		if err != nil {
			t.Fatal(err)
		}
		if back, _ := inventory.Canonical(got); string(back) != string(twin) || got.SelfDigest != h.SelfDigest {
			t.Fatalf("hashed=%v: the v2 retire Head does not read back as its logical Head", hashed)
		}
	}
}

// TestHeadV2RetiredRules: each rule of a v2 Head's packed retired list
// broken once is tamper.
func TestHeadV2RetiredRules(t *testing.T) {
	t.Parallel() // pure: runs while the package's cluster tests wait on the API server
	all, kept := ids("a-1", "a-2", "b", "c-1", "c-2"), ids("a-1", "a-2", "b")
	prev := dep("3.0.0", 'p', all)
	h := committedHead(t, 2, dep("3.1.0", 'q', kept), kept, &prev)
	h.Transition.Kind = TransitionRetire
	for i, id := range all[3:] {
		h.Retired = append(h.Retired, receipts.Retired{ID: id, UID: fmt.Sprintf("uid-%d", i), ResourceVersion: "7", Outcome: receipts.OutcomeDeleted})
	}
	if err := h.Seal(); err != nil {
		t.Fatal(err)
	}
	v2, err := h.encode(HeadSchemaV2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseHead(v2); err != nil {
		t.Fatalf("the v2 retire Head itself: %v", err)
	}
	groups := `"retiredGroups":[{"apiVersion":"v1","kind":"ConfigMap","names":[[0,"c-1"],[2,"2"]],"namespace":"ns"}],`
	states := `"retiredStates":[["uid-0","7","","deleted"],["uid-1","7","","deleted"]],`
	for name, c := range map[string]struct{ from, to, err string }{
		"retired listed too":  {`"retiredGroups"`, `"retired":[],"retiredGroups"`, "retired is listed"},
		"groups alone":        {states, ``, "come together"},
		"states alone":        {groups, ``, "come together"},
		"a state short":       {`,["uid-1","7","","deleted"]`, ``, "1 retiredStates for the 2 objects"},
		"a state of five":     {`["uid-1","7","","deleted"]`, `["uid-1","7","","deleted",""]`, "four strings"},
		"a state not strings": {`["uid-1","7","","deleted"]`, `["uid-1",7,"","deleted"]`, "four strings"},
		"unsorted":            {`[[0,"c-1"],[2,"2"]]`, `[[0,"c-2"],[2,"1"]]`, `"retired": identity v1/ConfigMap/ns/c-1 is out of order`},
	} {
		bad := strings.Replace(string(v2), c.from, c.to, 1)
		if bad == string(v2) {
			t.Fatalf("%s: %q not in %s", name, c.from, v2)
		}
		_, err := ParseHead([]byte(bad))
		if !fail.Is(err, fail.Tamper) || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: %v, want tamper %q", name, err, c.err)
		}
	}
}
