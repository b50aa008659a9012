package jwkset

import (
	"slices"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// renamed is k under another key ID.
func renamed(k JWK, kid string) JWK { k.Kid = kid; return k }

// A key revoked once is refused under every key ID, judged by the ledger
// alone (generation 6 revoked "a"; generation 6's keyset is all that a
// reverted or deleted keyset Secret would leave out).
func TestLedgerRevokedStaysRevoked(t *testing.T) {
	a, b, c := edKey("a", 1), ecKey("b", 2), edKey("c", 3)
	l := mustLedger(t, ks(3, []JWK{a}), ks(5, []JWK{a, b}, "z"), ks(6, []JWK{b}, "z", "a"), ks(7, []JWK{b, c}, "z", "a"))
	tpA := a.Thumbprint()
	refused := `key "a2" of generation 8 is the key revoked as "a" in generation 6 (RFC 7638 thumbprint ` + tpA + `)`
	tests := []struct {
		name    string
		next    *Keyset
		wantErr string
	}{
		{"revoked key under a new kid", ks(8, []JWK{b, c, renamed(a, "a2")}, "z", "a"), refused},
		{"revoked key under a new kid with use", ks(8, []JWK{b, c, func() JWK { k := renamed(a, "a2"); k.Use = "sig"; return k }()}, "z", "a"), refused},
		{"revoked key as the only key", ks(9, []JWK{renamed(a, "a2")}, "z", "a", "b", "c"), `key "a2" of generation 9 is the key revoked as "a" in generation 6`},
		{"a new key under a new kid", ks(8, []JWK{b, c, edKey("a2", 4)}, "z", "a"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := l.Admit(tt.next)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Admit: %v", err)
				}
				if e, ok := got.revokedKey("a"); !ok || e.Thumbprint == nil || *e.Thumbprint != tpA || e.RevokedIn == nil || *e.RevokedIn != 6 {
					t.Fatalf("the appended ledger lost a's record: %+v", e)
				}
				return
			}
			if !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Admit: %v, want conflict containing %q", err, tt.wantErr)
			}
		})
	}
	want := []LedgerKey{
		{Kid: "b", Thumbprint: ptr(b.Thumbprint())}, {Kid: "c", Thumbprint: ptr(c.Thumbprint())},
		{Kid: "z", RevokedIn: ptr(int64(5))}, {Kid: "a", Thumbprint: ptr(tpA), RevokedIn: ptr(int64(6))},
	}
	if !slices.EqualFunc(l.Keys, want, sameLedgerKey) {
		t.Fatalf("keys = %s, want %s", showKeys(l.Keys), showKeys(want))
	}
}

// A ledger written before thumbprints (v1) is carried forward: the active
// keys' thumbprints from current, a revoked key's from a recorded
// generation that still shows it, the others recorded as unknown.
func TestLedgerCarryForward(t *testing.T) {
	a, b, c := edKey("a", 1), ecKey("b", 2), edKey("c", 3)
	g5, g6 := ks(5, []JWK{a, b}, "z"), ks(6, []JWK{b}, "z", "a")
	v2 := mustLedger(t, g5, g6)
	v1 := &Ledger{Schema: LedgerSchemaV1, Current: v2.Current, Generations: v2.Generations}
	if err := v1.Validate(); err != nil {
		t.Fatal(err)
	}

	alone, err := v1.CarryForward()
	if err != nil {
		t.Fatal(err)
	}
	if alone.Schema != LedgerSchema || !slices.Equal(alone.UnknownRevoked(), []string{"z", "a"}) {
		t.Fatalf("carried forward alone: %s, unknown %q", showKeys(alone.Keys), alone.UnknownRevoked())
	}
	// What cannot be recovered is not judged: the limit docs/keyset.md states.
	if _, _, err := alone.Admit(ks(7, []JWK{b, renamed(a, "a2")}, "z", "a")); err != nil {
		t.Fatalf("a key whose material the ledger never saw revoked: %v", err)
	}

	known, err := v1.CarryForward(g5)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := known.revokedKey("a"); e.Thumbprint == nil || *e.Thumbprint != a.Thumbprint() || e.RevokedIn != nil {
		t.Fatalf("a's key from generation 5: %+v", e)
	}
	if !slices.Equal(known.UnknownRevoked(), []string{"z"}) {
		t.Fatalf("unknown after recovering a: %q", known.UnknownRevoked())
	}
	if _, _, err := known.Admit(ks(7, []JWK{b, renamed(a, "a2")}, "z", "a")); !fail.Is(err, fail.Conflict) ||
		!strings.Contains(err.Error(), `key "a2" of generation 7 is the key revoked as "a" before the ledger recorded when`) {
		t.Fatalf("Admit after recovering a's key: %v, want conflict naming a2 and a", err)
	}
	if _, err := v1.CarryForward(ks(5, []JWK{a, c}, "z")); !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "is not recorded by the ledger") {
		t.Fatalf("CarryForward from an unrecorded generation: %v", err)
	}
	// The old code admitted a generation trusting a's key as "a2"; once a
	// recorded generation shows a's key, even a rerun of it is refused.
	g7 := ks(7, []JWK{b, renamed(a, "a2")}, "z", "a")
	old := &Ledger{Schema: LedgerSchemaV1, Current: g7, Generations: append(slices.Clone(v1.Generations), LedgerEntry{7, digestOf(t, g7)})}
	if up, err := old.CarryForward(g5); err != nil {
		t.Fatal(err)
	} else if _, _, err := up.Admit(g7); !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), `key "a2" of generation 7 is the key revoked as "a"`) {
		t.Fatalf("rerun of a generation trusting a revoked key: %v, want conflict", err)
	}
	next, recorded, err := v1.Admit(g6)
	if err != nil || !recorded || next.Schema != LedgerSchema {
		t.Fatalf("rerun on a v1 ledger: %v, recorded %v, schema %s; want the ledger carried forward", err, recorded, next.Schema)
	}
}

func sameLedgerKey(x, y LedgerKey) bool {
	return x.Kid == y.Kid && eqPtr(x.Thumbprint, y.Thumbprint) && eqPtr(x.RevokedIn, y.RevokedIn)
}

func eqPtr[T comparable](x, y *T) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }

func showKeys(keys []LedgerKey) string {
	var out []string
	for _, e := range keys {
		s := e.Kid
		if e.Thumbprint != nil {
			s += " " + *e.Thumbprint
		}
		if e.RevokedIn != nil {
			s += " revoked"
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}
