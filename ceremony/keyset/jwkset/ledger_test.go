package jwkset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

func mustLedger(t testing.TB, sets ...*Keyset) *Ledger {
	t.Helper()
	l, err := NewLedger(nil, sets[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range sets[1:] {
		if l, _, err = l.Admit(k); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func digestOf(t testing.TB, k *Keyset) string {
	t.Helper()
	d, err := k.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Every publishing rule, judged against the ledger alone.
func TestLedgerAdmit(t *testing.T) {
	a, b, c := edKey("a", 1), ecKey("b", 2), edKey("c", 3)
	l := mustLedger(t, ks(3, []JWK{a}), ks(5, []JWK{a, b}, "z"))
	tests := []struct {
		name     string
		next     *Keyset
		recorded bool
		class    fail.Class
		wantErr  string
	}{
		{"rerun of the highest generation", ks(5, []JWK{a, b}, "z"), true, 0, ""},
		{"add a key", ks(6, []JWK{a, b, c}, "z"), false, 0, ""},
		{"revoke a key", ks(7, []JWK{b}, "z", "a"), false, 0, ""},
		{"rollback to a recorded generation", ks(3, []JWK{a}), false, fail.Conflict, "below the ledger's highest generation 5 (it was published before"},
		{"rollback to an unknown generation", ks(4, []JWK{a, b}, "z"), false, fail.Conflict, "generation 4 is below the ledger's highest generation 5: a keyset never goes back"},
		{"rewrite of the highest generation", ks(5, []JWK{a, b, c}, "z"), false, fail.Conflict, "generation 5 is already published with digest"},
		{"implicit key removal", ks(6, []JWK{b}, "z"), false, fail.Conflict, `active key "a" of generation 5 is missing from generation 6 without being revoked`},
		{"revocation un-appended", ks(6, []JWK{a, b}), false, fail.Conflict, "revocations only append"},
		{"key ID reused for another key", ks(6, []JWK{edKey("a", 9), b}, "z"), false, fail.Conflict, `key "a" changed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, recorded, err := l.Admit(tt.next)
			if tt.wantErr != "" {
				if !fail.Is(err, tt.class) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Admit: %v, want %v error containing %q", err, tt.class, tt.wantErr)
				}
				if got != nil {
					t.Fatal("a refused generation returned a ledger")
				}
				return
			}
			if err != nil || recorded != tt.recorded {
				t.Fatalf("Admit: recorded %v, %v; want recorded %v", recorded, err, tt.recorded)
			}
			if h := got.Highest(); h.Generation != tt.next.Generation || h.Digest != digestOf(t, tt.next) {
				t.Fatalf("highest after Admit: %+v", h)
			}
			if !recorded && len(got.Generations) != len(l.Generations)+1 {
				t.Fatalf("appended ledger has %d entries, want %d", len(got.Generations), len(l.Generations)+1)
			}
			if len(l.Generations) != 2 || l.Current.Generation != 5 {
				t.Fatal("Admit modified the ledger it judged")
			}
		})
	}
}

func TestLedgerFull(t *testing.T) {
	a := edKey("a", 1)
	l := mustLedger(t, ks(1, []JWK{a}))
	for g := int64(2); len(l.Generations) < MaxLedgerGenerations; g++ {
		k := ks(g, []JWK{a})
		l.Generations = append(l.Generations, LedgerEntry{g, digestOf(t, k)})
		l.Current = k
	}
	_, _, err := l.Admit(ks(l.Current.Generation+1, []JWK{a}))
	if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "full") {
		t.Fatalf("Admit on a full ledger: %v, want invalid, full", err)
	}
}

func TestNewLedgerAdopts(t *testing.T) {
	a, b := edKey("a", 1), ecKey("b", 2)
	l, err := NewLedger(ks(4, []JWK{a}), ks(5, []JWK{b}, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if got := []int64{l.Generations[0].Generation, l.Generations[1].Generation}; !slices.Equal(got, []int64{4, 5}) {
		t.Fatalf("adopted ledger records %v", got)
	}
	if _, err := NewLedger(ks(4, []JWK{a}), ks(5, []JWK{b})); !fail.Is(err, fail.Conflict) {
		t.Fatalf("adopting with an implicit key removal: %v, want conflict", err)
	}
}

func TestNewlyRevoked(t *testing.T) {
	a := edKey("a", 1)
	if got := NewlyRevoked(ks(5, []JWK{a}, "x"), ks(6, []JWK{a}, "x", "y", "z")); !slices.Equal(got, []string{"y", "z"}) {
		t.Fatalf("NewlyRevoked = %q", got)
	}
	if got := NewlyRevoked(nil, ks(6, []JWK{a}, "x")); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("NewlyRevoked(nil) = %q", got)
	}
	if got := NewlyRevoked(ks(6, []JWK{a}, "x"), ks(6, []JWK{a}, "x")); got != nil {
		t.Fatalf("NewlyRevoked of the same generation = %q", got)
	}
}

// The document is exactly the canonical JSON of its three members; every
// deviation is refused, naming what is wrong.
func TestParseLedger(t *testing.T) {
	a, b := edKey("a", 1), ecKey("b", 2)
	l := mustLedger(t, ks(3, []JWK{a}), ks(5, []JWK{a, b}, "z"))
	good, err := l.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseLedger(good)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := got.Bytes(); !bytes.Equal(again, good) || got.Highest().Generation != 5 {
		t.Fatal("ParseLedger(Bytes) does not round-trip")
	}
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		out, err := canon.Canonical(m)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	entries := func(m map[string]any) []any { return m["generations"].([]any) }
	keyAt := func(m map[string]any, i int) map[string]any { return m["keys"].([]any)[i].(map[string]any) }
	tests := []struct {
		name    string
		data    []byte
		wantErr string
	}{
		{"indented", func() []byte { var buf bytes.Buffer; _ = json.Indent(&buf, good, "", " "); return buf.Bytes() }(), "not in canonical form"},
		{"unknown member", edit(func(m map[string]any) { m["note"] = "x" }), "unknown field"},
		{"missing generations", edit(func(m map[string]any) { delete(m, "generations") }), "all required"},
		{"wrong schema", edit(func(m map[string]any) { m["schema"] = "qinglong/keyset-ledger@v3" }), "schema"},
		{"v1 with keys", edit(func(m map[string]any) { m["schema"] = LedgerSchemaV1 }), "keys: a qinglong/keyset-ledger@v1 ledger has no keys member"},
		{"v2 without keys", edit(func(m map[string]any) { delete(m, "keys") }), "keys: 0 entries, want 3"},
		{"active thumbprint edited", edit(func(m map[string]any) { keyAt(m, 0)["thumbprint"] = b.Thumbprint() }), "keys[0]: want {kid \"a\", thumbprint " + a.Thumbprint()},
		{"active key given a generation", edit(func(m map[string]any) { keyAt(m, 1)["revokedIn"] = 5 }), "keys[1]: want"},
		{"revoked kid edited", edit(func(m map[string]any) { keyAt(m, 2)["kid"] = "y" }), `keys[2].kid: "y", want "z"`},
		{"revocation in an unrecorded generation", edit(func(m map[string]any) { keyAt(m, 2)["revokedIn"] = 4 }), "keys[2].revokedIn: 4 is not a recorded generation"},
		{"revocation dated in the first generation", edit(func(m map[string]any) { keyAt(m, 2)["revokedIn"] = 3 }), "keys[2].revokedIn: 3 is the ledger's first generation"},
		{"malformed thumbprint", edit(func(m map[string]any) { keyAt(m, 2)["thumbprint"] = "abc" }), "keys[2].thumbprint"},
		{"keys entry member missing", edit(func(m map[string]any) { delete(keyAt(m, 2), "revokedIn") }), "not in canonical form"},
		{"keys entry member unknown", edit(func(m map[string]any) { keyAt(m, 2)["note"] = "x" }), "unknown field"},
		{"empty history", edit(func(m map[string]any) { m["generations"] = []any{} }), "0 entries"},
		{"history out of order", edit(func(m map[string]any) { e := entries(m); e[0], e[1] = e[1], e[0] }), "does not increase"},
		{"bad digest", edit(func(m map[string]any) { entries(m)[0].(map[string]any)["digest"] = "sha256:00" }), "generations[0].digest"},
		{"last entry is not current", edit(func(m map[string]any) { entries(m)[1].(map[string]any)["digest"] = "sha256:" + strings.Repeat("0", 64) }), "is not the current generation"},
		{"current revoked set edited", edit(func(m map[string]any) { m["current"].(map[string]any)["revokedKids"] = []any{} }), "is not the current generation"},
		{"current invalid", edit(func(m map[string]any) { m["current"].(map[string]any)["keys"] = []any{} }), "current: keyset: keys: no active key"},
		{"extra entry member", edit(func(m map[string]any) { entries(m)[0].(map[string]any)["at"] = "now" }), "unknown field"},
		{"duplicate member", []byte(strings.Replace(string(good), `{"current"`, `{"schema":"x","current"`, 1)), "appears twice"},
		{"not UTF-8", append(slices.Clone(good), 0xff), "UTF-8"},
		{"trailing value", append(slices.Clone(good), []byte("{}")...), "more than one JSON value"},
		{"oversize", make([]byte, MaxLedgerBytes+1), "more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseLedger(tt.data)
			if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParseLedger: %v, want invalid containing %q", err, tt.wantErr)
			}
		})
	}
}

// The entries of revoked key IDs follow current.revokedKids; those with
// revokedIn null come first, whatever their thumbprint, then the dated
// ones, their generations not decreasing (docs/keyset.md, "The ledger
// document").
func TestLedgerKeysOrder(t *testing.T) {
	a, b := edKey("a", 1), ecKey("b", 2)
	// Generation 3 is the first: "y" was revoked in or before it (null,
	// no thumbprint); "z" in 5 (never active: no thumbprint); "a" in 6.
	l := mustLedger(t, ks(3, []JWK{a}, "y"), ks(5, []JWK{a, b}, "y", "z"), ks(6, []JWK{b}, "y", "z", "a"))
	want := []LedgerKey{{Kid: "b", Thumbprint: ptr(b.Thumbprint())}, {Kid: "y"}, {Kid: "z", RevokedIn: ptr(int64(5))},
		{Kid: "a", Thumbprint: ptr(a.Thumbprint()), RevokedIn: ptr(int64(6))}}
	if !slices.EqualFunc(l.Keys, want, sameLedgerKey) {
		t.Fatalf("keys = %s, want %s", showKeys(l.Keys), showKeys(want))
	}
	for _, tt := range []struct {
		name    string
		edit    func(k []LedgerKey)
		wantErr string
	}{
		{"a null after a dated one", func(k []LedgerKey) { k[3].RevokedIn = nil }, "keys[3].revokedIn: null after a revocation recorded in generation 5"},
		{"generations decreasing", func(k []LedgerKey) { k[2].RevokedIn, k[3].RevokedIn = ptr(int64(6)), ptr(int64(5)) }, "keys[3].revokedIn: 5 is not a recorded generation at or after 6"},
		{"the undated one dated in the first generation", func(k []LedgerKey) { k[1].RevokedIn = ptr(int64(3)) }, "keys[1].revokedIn: 3 is the ledger's first generation"},
		{"a dated one undated, the null ones still first", func(k []LedgerKey) { k[2].RevokedIn = nil }, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := *l
			e.Keys = slices.Clone(l.Keys)
			tt.edit(e.Keys)
			err := e.Validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (!fail.Is(err, fail.Invalid) || !strings.Contains(fmt.Sprint(err), tt.wantErr)) {
				t.Fatalf("Validate: %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// FuzzParseLedger: ParseLedger never panics, and whatever it accepts is a
// valid ledger whose canonical bytes are exactly the input.
func FuzzParseLedger(f *testing.F) {
	l := mustLedger(f, ks(3, []JWK{edKey("a", 1)}), ks(5, []JWK{edKey("a", 1), ecKey("b", 2)}, "z"))
	good, err := l.Bytes()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	v1, err := (&Ledger{Schema: LedgerSchemaV1, Current: l.Current, Generations: l.Generations}).Bytes()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(v1)
	f.Add([]byte(`{"current":{},"generations":[],"schema":"qinglong/keyset-ledger@v1"}`))
	f.Add([]byte(`{"current":null,"generations":[{"digest":"","generation":1}],"schema":""}`))
	f.Add([]byte(`{"schema":"a","schema":"b"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ParseLedger(data)
		if err != nil {
			return
		}
		if err := l.Validate(); err != nil {
			t.Fatalf("ParseLedger accepted an invalid ledger: %v", err)
		}
		out, err := l.Bytes()
		if err != nil || !bytes.Equal(out, data) {
			t.Fatalf("accepted ledger does not re-encode to its input: %v", err)
		}
	})
}
