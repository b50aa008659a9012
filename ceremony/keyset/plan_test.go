package keyset

import (
	"slices"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/keyset/jwkset"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// Every rule of Decide, from what a publisher read.
func TestDecide(t *testing.T) {
	g1 := gen(t, 1, []string{"a"})
	g2 := gen(t, 2, []string{"a", "b"})       // overlap
	g3 := gen(t, 3, []string{"b"}, "a")       // revoking
	g3x := gen(t, 3, []string{"a", "b", "c"}) // another generation 3
	l12 := ledgerOf(t, g1, g2)
	l123 := ledgerOf(t, g1, g2, g3)
	g4revived := gen(t, 4, []string{"b", "a2"}, "a") // "a2" holds a's key (gen seeds by the first byte)
	revived := `key "a2" of generation 4 is the key revoked as "a" `
	type want struct {
		writeLedger, writeKeyset, adopted, behind bool
		revoked                                   []string
		highest                                   int64
	}
	tests := []struct {
		name    string
		st      State
		req     Request
		want    want
		class   fail.Class
		wantErr string
	}{
		{"first publish", State{}, Request{Next: g1}, want{writeLedger: true, writeKeyset: true, highest: 1}, 0, ""},
		{"first publish with --previous", State{}, Request{Next: g2, Previous: g1}, want{}, fail.Conflict, "nothing is published in this namespace"},
		// The revocation gate's base (docs/keyset.md, Publishing step 4):
		// with neither Secret nothing is published that a host could hold,
		// so nothing is newly revoked; without a keyset Secret, the
		// ledger's highest generation before this publish.
		{"first publish revoking key IDs, no base", State{}, Request{Next: gen(t, 1, []string{"b"}, "a")}, want{writeLedger: true, writeKeyset: true, highest: 1}, 0, ""},
		{"no keyset Secret, the ledger's highest is the base", State{Ledger: l12}, Request{Next: g3}, want{}, fail.Invalid, "generation 3 revokes a, which the published keyset (generation 2) still trusts"},
		{"no keyset Secret, the ledger already records the revoking generation", State{Ledger: l123}, Request{Next: g3}, want{writeKeyset: true, highest: 3}, 0, ""},
		{"overlap", State{Ledger: ledgerOf(t, g1), Keyset: g1, KeysetManaged: true}, Request{Next: g2}, want{writeLedger: true, writeKeyset: true, highest: 2}, 0, ""},
		{"revoking without confirmation", State{Ledger: l12, Keyset: g2, KeysetManaged: true}, Request{Next: g3}, want{}, fail.Invalid, "generation 3 revokes a, which the published keyset (generation 2) still trusts"},
		{"revoking confirmed", State{Ledger: l12, Keyset: g2, KeysetManaged: true}, Request{Next: g3, ConfirmOverlapObserved: true}, want{writeLedger: true, writeKeyset: true, revoked: []string{"a"}, highest: 3}, 0, ""},
		{"rerun after a complete publish", State{Ledger: l12, Keyset: g2, KeysetManaged: true}, Request{Next: g2}, want{highest: 2}, 0, ""},
		{"rerun after the keyset write failed", State{Ledger: l12, Keyset: g1, KeysetManaged: true}, Request{Next: g2, Previous: g1}, want{writeKeyset: true, behind: true, highest: 2}, 0, ""},
		{"rerun of a revoking generation after the keyset write failed", State{Ledger: l123, Keyset: g2, KeysetManaged: true}, Request{Next: g3}, want{}, fail.Invalid, "--confirm-overlap-observed"},
		{"rollback, all replicas restarted", State{Ledger: l123, Keyset: g3, KeysetManaged: true}, Request{Next: g2}, want{}, fail.Conflict, "below the ledger's highest generation 3 (it was published before"},
		{"rollback with no keyset Secret left", State{Ledger: l123}, Request{Next: g1}, want{}, fail.Conflict, "a keyset never goes back"},
		{"rewrite", State{Ledger: l123, Keyset: g3, KeysetManaged: true}, Request{Next: g3x}, want{}, fail.Conflict, "generation 3 is already published with digest"},
		{"implicit key removal", State{Ledger: l12, Keyset: g2, KeysetManaged: true}, Request{Next: gen(t, 3, []string{"b"})}, want{}, fail.Conflict, `active key "a" of generation 2 is missing`},
		{"revocation un-appended", State{Ledger: l123, Keyset: g3, KeysetManaged: true}, Request{Next: gen(t, 4, []string{"b"})}, want{}, fail.Conflict, "revocations only append"},
		{"stale --previous", State{Ledger: l123, Keyset: g3, KeysetManaged: true}, Request{Next: gen(t, 4, []string{"b", "c"}, "a"), Previous: g2}, want{}, fail.Conflict, "--previous is generation 2"},
		{"keyset Secret not in the ledger", State{Ledger: l12, Keyset: g3x, KeysetManaged: true}, Request{Next: g2}, want{}, fail.Tamper, "which the ledger does not record"},
		{"keyset Secret rewritten at a recorded generation", State{Ledger: l12, Keyset: gen(t, 2, []string{"a", "c"}), KeysetManaged: true}, Request{Next: g2}, want{}, fail.Tamper, "but the ledger records digest"},
		{"keyset Secret replaced, unlabelled", State{Ledger: l12, Keyset: g2}, Request{Next: g2}, want{}, fail.Tamper, "does not carry the label"},
		{"ledger removed", State{Keyset: g2, KeysetManaged: true}, Request{Next: g2}, want{}, fail.Tamper, "the generation is missing from the ledger"},
		{"unmanaged Secret without --previous", State{Keyset: g1}, Request{Next: g2}, want{}, fail.Conflict, "give --previous"},
		{"unmanaged Secret adopted", State{Keyset: g1}, Request{Next: g2, Previous: g1}, want{writeLedger: true, writeKeyset: true, adopted: true, highest: 2}, 0, ""},
		{"revoked key under a new kid, confirmed", State{Ledger: l123, Keyset: g3, KeysetManaged: true}, Request{Next: g4revived, ConfirmOverlapObserved: true}, want{}, fail.Conflict, revived + "in generation 3 (RFC 7638 thumbprint " + key("a", 'a').Thumbprint() + ")"},
		{"revoked key under a new kid, no keyset Secret", State{Ledger: l123}, Request{Next: g4revived, ConfirmOverlapObserved: true}, want{}, fail.Conflict, revived + "in generation 3"},
		{"revoked key under a new kid, keyset Secret reverted", State{Ledger: l123, Keyset: g1, KeysetManaged: true}, Request{Next: g4revived, ConfirmOverlapObserved: true}, want{}, fail.Conflict, revived + "in generation 3"},
		{"v1 ledger carried forward on a rerun", State{Ledger: v1Of(l12), Keyset: g2, KeysetManaged: true}, Request{Next: g2}, want{writeLedger: true, highest: 2}, 0, ""},
		{"v1 ledger, the keyset Secret shows the revoked key", State{Ledger: v1Of(l123), Keyset: g2, KeysetManaged: true}, Request{Next: g4revived, ConfirmOverlapObserved: true}, want{}, fail.Conflict, revived + "before the ledger recorded when"},
		{"adoption judges the successor", State{Keyset: g2}, Request{Next: gen(t, 3, []string{"b"}), Previous: g2}, want{}, fail.Conflict, "without being revoked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Decide(tt.st, tt.req)
			if tt.wantErr != "" {
				if !fail.Is(err, tt.class) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Decide: %v, want %v error containing %q", err, tt.class, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := want{p.WriteLedger, p.WriteKeyset, p.Adopted, p.Behind, p.NewlyRevoked, p.Ledger.Highest().Generation}
			if got.writeLedger != tt.want.writeLedger || got.writeKeyset != tt.want.writeKeyset || got.adopted != tt.want.adopted ||
				got.behind != tt.want.behind || !slices.Equal(got.revoked, tt.want.revoked) || got.highest != tt.want.highest {
				t.Fatalf("plan %+v, want %+v", got, tt.want)
			}
			if tt.st.Ledger != nil && p.WriteLedger && !p.CarriedForward && len(p.Ledger.Generations) != len(tt.st.Ledger.Generations)+1 {
				t.Fatalf("the new ledger does not append exactly one generation")
			}
		})
	}
}

// Carrying a v1 ledger forward recovers a revoked key's thumbprint from
// what the publisher read and the ledger records: --previous on a rerun.
func TestDecideCarryForwardFromPrevious(t *testing.T) {
	g1, g2, g3 := gen(t, 1, []string{"a"}), gen(t, 2, []string{"a", "b"}), gen(t, 3, []string{"b"}, "a")
	v1 := v1Of(ledgerOf(t, g1, g2, g3))
	for _, tt := range []struct {
		name     string
		previous *jwkset.Keyset
		unknown  []string
	}{
		{"without --previous", nil, []string{"a"}},
		{"with --previous showing a", g2, []string{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Decide(State{Ledger: v1}, Request{Next: g3, Previous: tt.previous})
			if err != nil {
				t.Fatal(err)
			}
			if !p.WriteLedger || !p.CarriedForward || p.Ledger.Schema != jwkset.LedgerSchema || !slices.Equal(p.Ledger.UnknownRevoked(), tt.unknown) {
				t.Fatalf("plan: write %v, carried %v, schema %s, unknown %q; want the ledger rewritten, unknown %q", p.WriteLedger, p.CarriedForward, p.Ledger.Schema, p.Ledger.UnknownRevoked(), tt.unknown)
			}
		})
	}
}
