package vectors

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/keyset"
	"github.com/qinglong/kubectl-ql3/ceremony/keyset/jwkset"
)

// TestKeysetVectors runs testdata/vectors/keyset against ceremony/keyset/jwkset:
// keyset files (docs/keyset.md rules 1–9 and the Keys rules), successor
// pairs (successor rules 1–5), ledger documents and ledger admission.
func TestKeysetVectors(t *testing.T) {
	each(t, "keyset", map[string]procedure{
		"keyset": func(t *testing.T, v vector, input []byte) {
			k, err := jwkset.Parse(input)
			verdict(t, v, err)
			if err == nil {
				digests(t, v, keysetDigests(t, input), codeKeysetDigests(t, k))
			}
		},
		"jwk": func(t *testing.T, v vector, input []byte) {
			j, err := jwkset.ParseJWK(input)
			verdict(t, v, err)
			if err == nil {
				key := jsonValue(t, input).(map[string]any)
				digests(t, v, map[string]string{"thumbprint " + j.Kid: thumbprint(t, key)}, map[string]string{"thumbprint " + j.Kid: j.Thumbprint()})
			}
		},
		"successor": func(t *testing.T, v vector, input []byte) {
			next := parseKeyset(t, input)
			err := jwkset.CheckSuccessor(parseKeyset(t, file(t, "keyset", v.Previous)), next)
			verdict(t, v, err)
			if err == nil {
				digests(t, v, keysetDigests(t, input), codeKeysetDigests(t, next))
			}
		},
		"ledger": func(t *testing.T, v vector, input []byte) {
			l, err := jwkset.ParseLedger(input)
			verdict(t, v, err)
			if err == nil {
				checkLedger(t, l, input)
			}
		},
		"revocation-gate": revocationGate,
		"ledger-admit": func(t *testing.T, v vector, input []byte) {
			l, err := jwkset.ParseLedger(file(t, "keyset", v.Ledger))
			if err != nil {
				t.Fatal(err)
			}
			out, _, err := l.Admit(parseKeyset(t, input))
			verdict(t, v, err)
			if err == nil {
				b, err := out.Bytes()
				if want := file(t, "keyset", v.Output); err != nil || !bytes.Equal(b, want) {
					t.Fatalf("admitted ledger:\n got %s\nwant %s", b, want)
				}
				checkLedger(t, out, b)
			}
		},
	})
}

// revocationGate judges a publish of input (docs/keyset.md, Publishing
// step 4) against the vector's ledger and keyset Secret (each absent when
// not named), without --confirm-overlap-observed: accepted when no key ID
// is newly revoked, refused (invalid) when the gate needs the
// confirmation.
func revocationGate(t *testing.T, v vector, input []byte) {
	var st keyset.State
	if v.Ledger != "" {
		l, err := jwkset.ParseLedger(file(t, "keyset", v.Ledger))
		if err != nil {
			t.Fatal(err)
		}
		st.Ledger = l
	}
	if k := v.Parameters["keysetSecret"]; k != "" {
		st.Keyset, st.KeysetManaged = parseKeyset(t, file(t, "keyset", k)), true
	}
	p, err := keyset.Decide(st, keyset.Request{Next: parseKeyset(t, input)})
	verdict(t, v, err)
	if err == nil && len(p.NewlyRevoked) > 0 {
		t.Fatalf("accepted with newly revoked %q", p.NewlyRevoked)
	}
}

func parseKeyset(t *testing.T, data []byte) *jwkset.Keyset {
	t.Helper()
	k, err := jwkset.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// keysetDigests recomputes from the file's bytes alone: keysetDigest is the
// keyset domain over RFC 8785 of the file's value; each key's thumbprint
// is RFC 7638 over its required members.
func keysetDigests(t *testing.T, data []byte) map[string]string {
	t.Helper()
	out := map[string]string{"keysetDigest": domainDigest("keyset", "v1", canonical(t, data))}
	for _, k := range jsonValue(t, data).(map[string]any)["keys"].([]any) {
		key := k.(map[string]any)
		out["thumbprint "+key["kid"].(string)] = thumbprint(t, key)
	}
	return out
}

func codeKeysetDigests(t *testing.T, k *jwkset.Keyset) map[string]string {
	t.Helper()
	d, err := k.Digest()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{"keysetDigest": d}
	for _, j := range k.Keys {
		out["thumbprint "+j.Kid] = j.Thumbprint()
	}
	return out
}

// checkLedger recomputes what a ledger's bytes bind, independently: the
// document is its own RFC 8785 form, its last entry is current's keyset
// digest, and each active key's entry carries current's key thumbprint.
func checkLedger(t *testing.T, l *jwkset.Ledger, data []byte) {
	t.Helper()
	if c := canonical(t, data); !bytes.Equal(c, data) {
		t.Errorf("the ledger is not its RFC 8785 form:\n%s\n%s", data, c)
	}
	doc := jsonValue(t, data).(map[string]any)
	cur, err := json.Marshal(doc["current"])
	if err != nil {
		t.Fatal(err)
	}
	want := keysetDigests(t, cur)
	gens := doc["generations"].([]any)
	if last := gens[len(gens)-1].(map[string]any)["digest"]; last != want["keysetDigest"] || l.Highest().Digest != want["keysetDigest"] {
		t.Errorf("last generation digest %v, code %s; recomputed %s", last, l.Highest().Digest, want["keysetDigest"])
	}
	keys, _ := doc["keys"].([]any) // absent in a v1 ledger
	for i, k := range keys[:min(len(keys), len(l.Current.Keys))] {
		e := k.(map[string]any)
		if e["thumbprint"] != want["thumbprint "+e["kid"].(string)] || l.Keys[i].Thumbprint == nil || *l.Keys[i].Thumbprint != e["thumbprint"] {
			t.Errorf("ledger key %v: recomputed thumbprint %s", e, want["thumbprint "+e["kid"].(string)])
		}
	}
}
