package receipts

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gowebpki/jcs"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

func TestRoundTripAndDeterminism(t *testing.T) {
	for _, r := range chain(t, 5, 7) {
		data := mustBytes(t, r)
		if data[len(data)-1] != '}' {
			t.Fatalf("receipt does not end at its closing brace: %q", data[len(data)-10:])
		}
		back, err := Parse(data)
		if err != nil {
			t.Fatalf("parse generation %d: %v", r.Generation, err)
		}
		if diff := cmp.Diff(r, back); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
		if again := mustBytes(t, back); !bytes.Equal(again, data) {
			t.Errorf("generation %d: bytes differ after a round trip", r.Generation)
		}
	}
	a, b := chain(t, 5, 7), chain(t, 5, 7)
	for i := range a {
		if !bytes.Equal(mustBytes(t, a[i]), mustBytes(t, b[i])) {
			t.Errorf("generation %d: the same input gave different bytes", a[i].Generation)
		}
	}
}

func TestFileName(t *testing.T) {
	rs := chain(t, 4, 2)
	want := []string{
		"000001-install-3.0.0.receipt.json",
		"000002-upgrade-3.1.0.receipt.json",
		"000003-upgrade-3.2.0.receipt.json",
		"000004-rollback-3.1.0.receipt.json",
	}
	for i, r := range rs {
		if got := FileName(r); got != want[i] {
			t.Errorf("FileName = %q, want %q", got, want[i])
		}
	}
	big := following(rs[3], KindUpgrade, "4.0.0-rc.1+build.5").with(func(r *Receipt) { r.Generation = 1234567 })
	big.r.PreviousReceiptDigest = td("x")
	if got := FileName(&big.r); got != "1234567-upgrade-4.0.0-rc.1+build.5.receipt.json" {
		t.Errorf("FileName = %q", got)
	}
}

// TestSelfDigestDefinition recomputes selfDigest the way docs/receipts.md
// tells an auditor to: decode, drop "selfDigest", canonicalise, digest.
func TestSelfDigestDefinition(t *testing.T) {
	for _, r := range chain(t, 3, 4) {
		var m map[string]any
		if err := json.Unmarshal(mustBytes(t, r), &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "selfDigest")
		raw, _ := json.Marshal(m)
		c, err := jcs.Transform(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := canon.DigestBytes("receipt", c); got != r.SelfDigest {
			t.Errorf("generation %d: recomputed %q, sealed %q", r.Generation, got, r.SelfDigest)
		}
	}
}

// TestValidation checks each rule twice: Seal refuses the receipt, and
// Parse refuses the same receipt forged with a correct selfDigest. Seal and
// Parse thus agree, so the ceremony cannot publish what the audit rejects.
func TestValidation(t *testing.T) {
	two := func() *rb { return following(newReceipt().sealed(t), KindUpgrade, "3.1.0") }
	rs := chain(t, 4, 3)
	tests := []struct {
		name    string
		b       *rb
		wantErr string
	}{
		{"schema", newReceipt().with(func(r *Receipt) { r.Schema = "qinglong/deployment-receipt@v1" }), `"schema"`},
		{"generation 0", newReceipt().with(func(r *Receipt) { r.Generation = 0 }), `"generation"`},
		{"generation above 2^53", two().with(func(r *Receipt) { r.Generation = 1 << 53 }), `"generation"`},
		{"kind", newReceipt().with(func(r *Receipt) { r.Transition.Kind = "apply" }), `"transition.kind"`},
		{"upgrade at generation 1", newReceipt().with(func(r *Receipt) { r.Transition.Kind = KindUpgrade }), `"transition.kind"`},
		{"install at generation 2", two().with(func(r *Receipt) { r.Transition.Kind = KindInstall }), `"transition.kind"`},
		{"command digest", newReceipt().with(func(r *Receipt) { r.Transition.CommandDigest = "sha256:ABC" }), `"transition.commandDigest"`},
		{"preflight digest", newReceipt().with(func(r *Receipt) { r.Transition.PreflightDigest = "" }), `"transition.preflightDigest"`},
		{"version with v", newReceipt().with(func(r *Receipt) { r.Deployment.Version = "v3.0.0" }), `"deployment.version"`},
		{"version not semver", newReceipt().with(func(r *Receipt) { r.Deployment.Version = "3.0" }), `"deployment.version"`},
		{"lock digest", newReceipt().with(func(r *Receipt) { r.Deployment.LockDigest = "md5:00" }), `"deployment.lockDigest"`},
		{"inventory digest format", newReceipt().with(func(r *Receipt) { r.Deployment.InventoryDigest = "x" }), `"deployment.inventoryDigest"`},
		{"inventory digest mismatch", newReceipt().with(func(r *Receipt) { r.Deployment.InventoryDigest = td("other") }), `"deployment.inventoryDigest"`},
		{"inventory count", newReceipt().with(func(r *Receipt) { r.Deployment.InventoryCount = 4 }), `"deployment.inventoryCount"`},
		{"inventory null", newReceipt().inv(0).with(func(r *Receipt) { r.Inventory = nil }), `"inventory": is null`},
		{"count negative", newReceipt().inv(0).with(func(r *Receipt) { r.Deployment.InventoryCount = -1 }), `"deployment.inventoryCount"`},
		{"inventory unsorted", newReceipt().with(func(r *Receipt) { r.Inventory[0], r.Inventory[1] = r.Inventory[1], r.Inventory[0] }), `"inventory"`},
		{"inventory duplicate", newReceipt().with(func(r *Receipt) { r.Inventory[1] = r.Inventory[0] }), `"inventory"`},
		{"identity without name", newReceipt().with(func(r *Receipt) { r.Inventory[2].Name = "" }), `"inventory[2].name"`},
		{"previous at generation 1", newReceipt().with(func(r *Receipt) { d := r.Deployment; r.PreviousDeployment = &d }), `"previousDeployment"`},
		{"previous digest at generation 1", newReceipt().with(func(r *Receipt) { r.PreviousReceiptDigest = td("p") }), `"previousReceiptDigest"`},
		{"no previous at generation 2", two().with(func(r *Receipt) { r.PreviousDeployment = nil }), `"previousDeployment"`},
		{"no previous digest at generation 2", two().with(func(r *Receipt) { r.PreviousReceiptDigest = "" }), `"previousReceiptDigest"`},
		{"bad previous version", two().with(func(r *Receipt) { r.PreviousDeployment.Version = "01.0.0" }), `"previousDeployment.version"`},
		{"upgrade not above previous", two().version("3.0.0"), `"deployment.version"`},
		{"upgrade to a pre-release of the same version", two().version("3.0.0-rc.1"), `"deployment.version"`},
		{"rollback changes inventory", following(rs[2], KindRollback, "").with(func(r *Receipt) { r.PreviousDeployment.InventoryCount++ }), `"deployment.inventoryCount"`},
		{"head digest", newReceipt().with(func(r *Receipt) { r.Head.StateDigest = "sha256:" }), `"head.stateDigest"`},
		{"cluster identity", newReceipt().with(func(r *Receipt) { r.Target.ClusterIdentity = "uid" }), `"target.clusterIdentity"`},
		{"namespace", newReceipt().with(func(r *Receipt) { r.Target.Namespace = "Prod" }), `"target.namespace"`},
		{"step digest", newReceipt().with(func(r *Receipt) { r.Steps.Converge = "" }), `"steps.converge"`},
		{"tool name", newReceipt().with(func(r *Receipt) { r.Tool.Name = "" }), `"tool.name"`},
		{"flags", newReceipt().with(func(r *Receipt) { r.Flags.MultiResourceTransactional = true }), `"flags"`},
		{"recovery", newReceipt().with(func(r *Receipt) { r.Flags.Recovery = "retry" }), `"flags"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.b.r
			err := r.Seal()
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !fail.Is(err, fail.Tamper) {
				t.Fatalf("Seal: got %v, want a tamper error naming %s", err, tt.wantErr)
			}
			if r.SelfDigest != tt.b.r.SelfDigest {
				t.Errorf("Seal changed selfDigest on error")
			}
			_, err = Parse(forge(t, &r))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !fail.Is(err, fail.Tamper) {
				t.Fatalf("Parse: got %v, want a tamper error naming %s", err, tt.wantErr)
			}
		})
	}
	// Strings the JSON encoder would rewrite are refused by Seal (a forged
	// file holds the rewritten, valid string instead).
	bad := newReceipt().with(func(r *Receipt) { r.Tool.FieldManager = "\xff" }).r
	if err := bad.Seal(); err == nil || !strings.Contains(err.Error(), `"tool.fieldManager"`) {
		t.Errorf("invalid UTF-8: %v", err)
	}
	// The valid neighbours of the cases above seal.
	following(rs[3], KindUpgrade, "3.1.1-rc.1+b").sealed(t)
	following(rs[2], KindRollback, "").sealed(t)
	newReceipt().inv(0).sealed(t) // an empty inventory is []
}

// TestParseStrict feeds bytes that decode to a valid receipt but are not
// its exact canonical form, or carry other members.
func TestParseStrict(t *testing.T) {
	r := following(newReceipt().sealed(t), KindUpgrade, "3.1.0").sealed(t)
	good := mustBytes(t, r)
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		delete(m, "selfDigest")
		raw, _ := json.Marshal(m)
		c, err := jcs.Transform(raw)
		if err != nil {
			t.Fatal(err)
		}
		m["selfDigest"] = canon.DigestBytes("receipt", c)
		raw, _ = json.Marshal(m)
		c, _ = jcs.Transform(raw)
		return c
	}
	var pretty bytes.Buffer
	_ = json.Indent(&pretty, good, "", "  ")
	tests := []struct {
		name    string
		data    []byte
		wantErr string
	}{
		{"empty", nil, "receipt is empty"},
		{"not json", []byte("hello"), "not a JSON object"},
		{"array", []byte("[]"), "not a JSON object"},
		{"trailing newline", append(append([]byte{}, good...), '\n'), "ends with a newline"},
		{"trailing bytes", append(append([]byte{}, good...), ' ', '{', '}'), "bytes after the JSON object"},
		{"leading space", append([]byte(" "), good...), "not canonical"},
		{"pretty printed", pretty.Bytes(), "not canonical"},
		{"unknown top-level field", edit(func(m map[string]any) { m["note"] = "x" }), `unknown field "note"`},
		{"unknown nested field", edit(func(m map[string]any) { m["tool"].(map[string]any)["extra"] = true }), `unknown field "extra"`},
		{"unknown identity field", edit(func(m map[string]any) { m["inventory"].([]any)[0].(map[string]any)["uid"] = "u" }), `unknown field "uid"`},
		{"missing field", edit(func(m map[string]any) { delete(m, "steps") }), `"steps": is missing`},
		{"missing nested field", edit(func(m map[string]any) { delete(m["transition"].(map[string]any), "forceConflicts") }), `"transition.forceConflicts": is missing`},
		{"missing identity field", edit(func(m map[string]any) { delete(m["inventory"].([]any)[1].(map[string]any), "namespace") }), `"inventory[1].namespace": is missing`},
		{"null string", edit(func(m map[string]any) { m["previousReceiptDigest"] = nil }), `"previousReceiptDigest": is null`},
		{"null inventory", edit(func(m map[string]any) { m["inventory"] = nil }), `"inventory"`},
		{"upper-case key", edit(func(m map[string]any) { m["Generation"] = m["generation"]; delete(m, "generation") }), `"Generation": is unknown`},
		{"missing selfDigest", bytes.Replace(good, []byte(`,"selfDigest":"`+r.SelfDigest+`"`), nil, 1), `"selfDigest": is missing`},
		{"duplicate key", bytes.Replace(good, []byte(`{"deployment":`), []byte(`{"deployment":{},"deployment":`), 1), "not canonical"},
		{"number form", bytes.Replace(good, []byte(`"generation":2`), []byte(`"generation":2.0`), 1), "generation"},
		{"escaped letter", bytes.Replace(good, []byte(`"upgrade"`), []byte(`"\u0075pgrade"`), 1), "not canonical"},
		{"wrong type", bytes.Replace(good, []byte(`"generation":2`), []byte(`"generation":"2"`), 1), "generation"},
		{"other schema", bytes.Replace(good, []byte(Schema), []byte("qinglong/deployment-receipt@v1"), 1), `"schema": "qinglong/deployment-receipt@v1" is not`},
		{"signature file", mustSign(t, r, testKey(1)), `"schema": "qinglong/receipt-signature@v1" is not`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.data)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !fail.Is(err, fail.Tamper) {
				t.Fatalf("got %v, want a tamper error containing %s", err, tt.wantErr)
			}
		})
	}
}

func mustSign(t testing.TB, r *Receipt, k []byte) []byte {
	t.Helper()
	s, err := Sign(r, k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mutations yields single-byte changes of data at position i: a low bit
// flip, a case flip, and a structural character.
func mutations(data []byte, i int) [][]byte {
	var out [][]byte
	for _, v := range []byte{data[i] ^ 0x01, data[i] ^ 0x20, '"', '0'} {
		if v == data[i] {
			continue
		}
		m := bytes.Clone(data)
		m[i] = v
		out = append(out, m)
	}
	return out
}

func TestTamperEveryByte(t *testing.T) {
	r := following(newReceipt().inv(2).sealed(t), KindUpgrade, "3.1.0").sealed(t)
	data := mustBytes(t, r)
	n := 0
	for i := range data {
		for _, m := range mutations(data, i) {
			n++
			if got, err := Parse(m); err == nil {
				t.Fatalf("byte %d changed to %q: accepted as generation %d", i, m[i], got.Generation)
			} else if !fail.Is(err, fail.Tamper) {
				t.Fatalf("byte %d: %v is not a tamper error", i, err)
			}
		}
	}
	// Deleting or duplicating any byte is caught too.
	for i := range data {
		cut := append(bytes.Clone(data[:i]), data[i+1:]...)
		dup := append(bytes.Clone(data[:i+1]), data[i:]...)
		if _, err := Parse(cut); err == nil {
			t.Fatalf("byte %d deleted: accepted", i)
		}
		if _, err := Parse(dup); err == nil {
			t.Fatalf("byte %d duplicated: accepted", i)
		}
	}
	t.Logf("%d bytes, %d single-byte mutations, all rejected", len(data), n)
}

func TestTamperSampledLarge(t *testing.T) {
	r := newReceipt().inv(1000).sealed(t)
	data := mustBytes(t, r)
	rng := rand.New(rand.NewPCG(1, 2))
	samples := 100
	if testing.Short() {
		samples = 20
	}
	for range samples {
		i := rng.IntN(len(data))
		for _, m := range mutations(data, i) {
			if _, err := Parse(m); err == nil {
				t.Fatalf("byte %d changed to %q: accepted", i, m[i])
			}
		}
	}
}

func TestReorderInventory(t *testing.T) {
	r := newReceipt().inv(10).sealed(t)
	swapped := *r
	swapped.Inventory = append([]canon.Identity(nil), r.Inventory...)
	swapped.Inventory[3], swapped.Inventory[7] = swapped.Inventory[7], swapped.Inventory[3]
	// Reordered as is: the selfDigest no longer matches.
	data, _ := swapped.canonical()
	if _, err := Parse(data); err == nil || !strings.Contains(err.Error(), `"selfDigest"`) &&
		!strings.Contains(err.Error(), `"deployment.inventoryDigest"`) && !strings.Contains(err.Error(), `"inventory"`) {
		t.Fatalf("reordered: got %v", err)
	}
	// Reordered and re-digested everywhere: the order rule still holds.
	swapped.Deployment.InventoryDigest, _ = canon.InventoryDigest(swapped.Inventory)
	if _, err := Parse(forge(t, &swapped)); err == nil || !strings.Contains(err.Error(), "out of order") {
		t.Fatalf("reordered and re-digested: got %v", err)
	}
}

func TestBytesRequiresSeal(t *testing.T) {
	b := newReceipt()
	if _, err := b.r.Bytes(); err == nil || !strings.Contains(err.Error(), "not sealed") {
		t.Fatalf("unsealed: %v", err)
	}
	r := b.sealed(t)
	r.Deployment.Version = "3.0.1"
	if _, err := r.Bytes(); err == nil || !strings.Contains(err.Error(), `"selfDigest"`) {
		t.Fatalf("changed after sealing: %v", err)
	}
	var nilR *Receipt
	if err := nilR.Seal(); err == nil {
		t.Fatal("nil receipt sealed")
	}
}

func TestCompareSemVer(t *testing.T) {
	// In increasing precedence (semver.org §11).
	order := []string{
		"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
		"1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.2.0", "1.10.0", "2.0.0", "10.0.0",
	}
	for i, a := range order {
		if !isSemVer(a) {
			t.Fatalf("%q rejected", a)
		}
		for j, b := range order {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := compareSemVer(a, b); got != want {
				t.Errorf("compare(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	}
	if compareSemVer("1.0.0+a", "1.0.0+b") != 0 {
		t.Error("build metadata must not count")
	}
	for _, bad := range []string{"v1.0.0", "1.0", "01.0.0", "1.0.0-01", "1.0.0-", "1.0.0+", " 1.0.0", "1.0.0/x"} {
		if isSemVer(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}
