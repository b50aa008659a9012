package jwkset

import (
	"slices"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

func ks(gen int64, keys []JWK, revoked ...string) *Keyset {
	if revoked == nil {
		revoked = []string{}
	}
	return &Keyset{Generation: gen, Keys: keys, RevokedKids: revoked}
}

func TestCheckSuccessor(t *testing.T) {
	a, b, c := edKey("a", 1), ecKey("b", 2), edKey("c", 3)
	prev := ks(5, []JWK{a, b}, "z")
	tests := []struct {
		name    string
		next    *Keyset
		wantErr string
	}{
		{"same generation, same content", ks(5, []JWK{a, b}, "z"), ""},
		{"add a key", ks(6, []JWK{a, b, c}, "z"), ""},
		{"revoke a key", ks(6, []JWK{b}, "z", "a"), ""},
		{"skip generations", ks(9, []JWK{a, b}, "z"), ""},
		{"revoke and add in one step", ks(6, []JWK{b, c}, "z", "a"), ""},
		{"new generation, same content", ks(6, []JWK{a, b}, "z"), ""},
		{"generation decreases", ks(4, []JWK{a, b}, "z"), "generation 4 is older than the previous generation 5"},
		{"same generation rewritten", ks(5, []JWK{a, b, c}, "z"), "generation 5 already exists with digest"},
		{"same generation, keys reordered", ks(5, []JWK{b, a}, "z"), "generation 5 already exists with digest"},
		{"revocation removed", ks(6, []JWK{a, b}), "revocations only append"},
		{"revocation replaced", ks(6, []JWK{a, b}, "y"), "revocations only append"},
		{"revocation inserted before", ks(6, []JWK{b}, "a", "z"), "revocations only append"},
		{"active key removed silently", ks(6, []JWK{b}, "z"), `active key "a" of generation 5 is missing from generation 6 without being revoked`},
		{"key ID keeps its key", ks(6, []JWK{edKey("a", 7), b}, "z"), `key "a" changed between generations 5 and 6`},
		{"revoked key back under a new kid", ks(6, []JWK{b, func() JWK { k := a; k.Kid = "a2"; return k }()}, "z", "a"), `key "a2" of generation 6 is the key revoked as "a" in generation 6 (RFC 7638 thumbprint ` + a.Thumbprint() + `)`},
		{"revoked key back with another alg and use", ks(6, []JWK{b, func() JWK { k := a; k.Kid, k.Use = "a2", "sig"; return k }()}, "z", "a"), `is the key revoked as "a"`},
		{"alg of a kept key changes", ks(6, []JWK{a, func() JWK { k := b; k.Use = "sig"; return k }()}, "z"), `key "b" changed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.next.Validate(); err != nil {
				t.Fatalf("test case is not a valid generation: %v", err)
			}
			err := CheckSuccessor(prev, tt.next)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckSuccessor: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("CheckSuccessor = %v, want an error containing %q", err, tt.wantErr)
			}
			if !fail.Is(err, fail.Conflict) {
				t.Fatalf("class %v, want conflict", fail.ClassOf(err))
			}
		})
	}
}

func TestPlanRotation(t *testing.T) {
	old1, old2, add := edKey("old-1", 1), ecKey("old-2", 2), edKey("new", 3)
	cur := ks(7, []JWK{old1, old2}, "gone")

	r, err := PlanRotation(cur, add, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Overlap.Generation != 8 || !slices.Equal(r.Overlap.Kids(), []string{"old-1", "old-2", "new"}) || !slices.Equal(r.Overlap.RevokedKids, []string{"gone"}) {
		t.Fatalf("overlap = %+v", r.Overlap)
	}
	if r.Revoking.Generation != 9 || !slices.Equal(r.Revoking.Kids(), []string{"new"}) || !slices.Equal(r.Revoking.RevokedKids, []string{"gone", "old-1", "old-2"}) {
		t.Fatalf("revoking = %+v", r.Revoking)
	}
	if !slices.Equal(r.Revoked, []string{"old-1", "old-2"}) {
		t.Fatalf("revoked = %q", r.Revoked)
	}
	// Skipping the overlap is exactly what the rules allow but the
	// procedure forbids; the rules still accept each step.
	for _, step := range [][2]*Keyset{{cur, r.Overlap}, {r.Overlap, r.Revoking}} {
		if err := CheckSuccessor(step[0], step[1]); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(cur.Kids(), []string{"old-1", "old-2"}) || len(cur.RevokedKids) != 1 {
		t.Fatalf("PlanRotation changed the current generation: %+v", cur)
	}

	r, err = PlanRotation(cur, add, []string{"old-2"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Revoking.Kids(), []string{"old-1", "new"}) || !slices.Equal(r.Revoking.RevokedKids, []string{"gone", "old-2"}) {
		t.Fatalf("revoking only old-2 = %+v", r.Revoking)
	}

	full := ks(1, []JWK{edKey("a", 1), edKey("b", 2), edKey("c", 3), edKey("d", 4), edKey("e", 5), edKey("f", 6), edKey("g", 7), edKey("h", 8)})
	manyRevoked := ks(1, []JWK{old1}, kids("r", 64)...)
	tests := []struct {
		name    string
		cur     *Keyset
		add     JWK
		revoke  []string
		wantErr string
	}{
		{"kid already active", cur, edKey("old-1", 9), nil, `key ID "old-1" is already active`},
		{"kid revoked before", cur, edKey("gone", 9), nil, `key ID "gone" was revoked before`},
		{"same key material", cur, ecKey("fresh", 2), nil, `the same public key is already active as "old-2"`},
		{"invalid new key", cur, JWK{Kty: KtyOKP, Kid: "x", Alg: AlgES256, Crv: CrvEd25519, X: old1.X}, nil, `key.alg: "ES256" does not match`},
		{"overlap above eight keys", full, edKey("new", 30), nil, "the overlap would exceed 8"},
		{"revoke a key that is not active", cur, add, []string{"gone"}, `revoke: "gone" is not an active key`},
		{"revocations above 64", manyRevoked, add, nil, "would list 65 revoked key IDs"},
		{"no room for two generations", ks(MaxGeneration-1, []JWK{old1}), add, nil, "no room for two more generations"},
		{"invalid current", ks(0, []JWK{old1}), add, nil, "generation: 0 is out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := PlanRotation(tt.cur, tt.add, tt.revoke)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("PlanRotation = %v, want an error containing %q", err, tt.wantErr)
			}
			if !fail.Is(err, fail.Invalid) {
				t.Fatalf("class %v, want invalid", fail.ClassOf(err))
			}
		})
	}
}
