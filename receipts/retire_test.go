package receipts

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// retiring is the retire after p dropping p's identities at idx (kept
// sorted), each deleted with a UID and resourceVersion.
func retiring(p *Receipt, v string, idx ...int) *rb {
	b := following(p, KindRetire, v)
	drop := map[int]bool{}
	for _, i := range idx {
		drop[i] = true
	}
	b.r.Inventory = nil
	b.r.Retired = nil
	for i, id := range p.Inventory {
		if drop[i] {
			b.r.Retired = append(b.r.Retired, Retired{ID: id, UID: "uid-" + id.Name, ResourceVersion: "1", Outcome: OutcomeDeleted})
		} else {
			b.r.Inventory = append(b.r.Inventory, id)
		}
	}
	if b.r.Inventory == nil {
		b.r.Inventory = []canon.Identity{}
	}
	return b.inventoryFromList()
}

func (b *rb) inventoryFromList() *rb {
	b.r.Deployment.InventoryCount = len(b.r.Inventory)
	b.r.Deployment.InventoryDigest, _ = canon.InventoryDigest(b.r.Inventory)
	return b
}

// A receipt of another kind has no retired member: its bytes are those of
// a receipt written before retirement existed.
func TestNonRetireReceiptsOmitRetired(t *testing.T) {
	for _, r := range chain(t, 4, 3) {
		if b := mustBytes(t, r); bytes.Contains(b, []byte(`"retired"`)) {
			t.Fatalf("%s receipt names retired: %s", r.Transition.Kind, b)
		}
	}
}

func TestRetireReceiptRules(t *testing.T) {
	base := chain(t, 2, 4)[1] // generation 2, upgrade to 3.1.0, 4 objects
	tests := []struct {
		name string
		b    *rb
		msg  string // "" = valid
	}{
		{"retire two", retiring(base, "3.2.0", 0, 2), ""},
		{"absent at preflight", retiring(base, "3.2.0", 1).with(func(r *Receipt) {
			r.Retired[0].UID, r.Retired[0].ResourceVersion, r.Retired[0].Outcome = "", "", OutcomeAlreadyAbsent
		}), ""},
		{"absent at preflight, recreated", retiring(base, "3.2.0", 1).with(func(r *Receipt) {
			r.Retired[0].UID, r.Retired[0].ResourceVersion, r.Retired[0].Outcome = "", "", OutcomeLeftRecreated
		}), ""},
		{"left changed", retiring(base, "3.2.0", 1).with(func(r *Receipt) { r.Retired[0].Outcome = OutcomeLeftChanged }), ""},
		{"absent at preflight but deleted", retiring(base, "3.2.0", 1).with(func(r *Receipt) { r.Retired[0].UID, r.Retired[0].ResourceVersion = "", "" }), "absent at preflight"},
		{"uid without resourceVersion", retiring(base, "3.2.0", 1).with(func(r *Receipt) { r.Retired[0].ResourceVersion = "" }), "both be set"},
		{"reviewed digest", retiring(base, "3.2.0", 1).with(func(r *Receipt) { r.Retired[0].ReviewedDigest = canon.DigestBytes("example", nil) }), ""},
		{"reviewed digest malformed", retiring(base, "3.2.0", 1).with(func(r *Receipt) { r.Retired[0].ReviewedDigest = "sha256:00" }), `"retired[0].reviewedDigest"`},
		{"reviewed digest on an absent object", retiring(base, "3.2.0", 1).with(func(r *Receipt) {
			r.Retired[0].UID, r.Retired[0].ResourceVersion, r.Retired[0].Outcome = "", "", OutcomeAlreadyAbsent
			r.Retired[0].ReviewedDigest = canon.DigestBytes("example", nil)
		}), "recorded absent at preflight"},
		{"pending outcome", retiring(base, "3.2.0", 1).with(func(r *Receipt) { r.Retired[0].Outcome = OutcomePending }), `"pending" is not`},
		{"empty retired", retiring(base, "3.2.0", 1).with(func(r *Receipt) { r.Retired = []Retired{} }), "missing or empty"},
		{"retired on an upgrade", following(base, KindUpgrade, "3.2.0").with(func(r *Receipt) {
			r.Retired = []Retired{{ID: r.Inventory[0], UID: "u", ResourceVersion: "1", Outcome: OutcomeDeleted}}
		}), "only a retire"},
		{"same version", retiring(base, "3.1.0", 1), "not above"},
		{"count mismatch", retiring(base, "3.2.0", 1).with(func(r *Receipt) {
			r.Retired = append(r.Retired, Retired{ID: canon.Identity{APIVersion: "v1", Kind: "ConfigMap", Namespace: "zz", Name: "x"}, UID: "u", ResourceVersion: "1", Outcome: OutcomeDeleted})
		}), "retires 2 object(s)"},
		{"unsorted", retiring(base, "3.2.0", 0, 2).with(func(r *Receipt) { r.Retired[0], r.Retired[1] = r.Retired[1], r.Retired[0] }), "out of order"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.b.r
			err := r.Seal()
			if tt.msg == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				back, err := Parse(mustBytes(t, &r))
				if err != nil || len(back.Retired) != len(r.Retired) {
					t.Fatalf("round trip: %v", err)
				}
				return
			}
			if err == nil || !fail.Is(err, fail.Tamper) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("want tamper containing %q, got %v", tt.msg, err)
			}
			// What Seal refuses, Parse refuses too (forged digests).
			if _, err := Parse(forge(t, &r)); err == nil {
				t.Fatal("Parse accepted what Seal refused")
			}
		})
	}
}

func TestRetireChain(t *testing.T) {
	rs := chain(t, 2, 4)
	good := retiring(rs[1], "3.2.0", 1, 3).sealed(t)
	up := following(good, KindUpgrade, "3.3.0").sealed(t)
	dir := t.TempDir()
	writeChain(t, dir, append(rs, good, up))
	if rep := mustAudit(t, []string{dir}, AuditOptions{}); !rep.OK() {
		t.Fatalf("install, upgrade, retire, upgrade:\n%s", failures(rep))
	}
	// A retire whose inventory drops an object it does not list.
	sneaky := retiring(rs[1], "3.2.0", 1).with(func(r *Receipt) {
		r.Inventory = r.Inventory[1:]
		r.Retired = append(r.Retired, Retired{ID: canon.Identity{APIVersion: "v1", Kind: "ConfigMap", Namespace: "zz", Name: "ghost"}, UID: "u", ResourceVersion: "1", Outcome: OutcomeDeleted})
	}).inventoryFromList().sealed(t)
	dir2 := t.TempDir()
	writeChain(t, dir2, append(rs, sneaky))
	rep, err := Audit([]string{dir2}, AuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || !strings.Contains(strings.Join(rep.Chain.Reasons, "\n"), "did not deploy") || !strings.Contains(strings.Join(rep.Chain.Reasons, "\n"), "does not list as retired") {
		t.Fatalf("audit of a retire that drops an unlisted object: %+v", rep.Chain)
	}
	_ = os.Remove(dir2)
}
