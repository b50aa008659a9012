package receipts

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// FuzzParse: Parse never panics, and whatever it accepts re-serialises to
// the identical bytes.
func FuzzParse(f *testing.F) {
	rs := chain(f, 4, 3)
	for _, r := range rs {
		f.Add(mustBytes(f, r))
	}
	odd := newReceipt().with(func(r *Receipt) {
		r.Inventory[0].Name = "a\"b\\c\u2028\u00e9<&>\x01\x7f😀"
		canon.SortIdentities(r.Inventory)
		r.Deployment.InventoryDigest, _ = canon.InventoryDigest(r.Inventory)
		r.Tool.FieldManager = "mgr\t\u2029"
	}).sealed(f)
	f.Add(mustBytes(f, odd))
	f.Add(mustBytes(f, retiring(rs[1], "3.9.0", 0).sealed(f)))
	f.Add(mustSign(f, rs[0], testKey(1)))
	f.Add([]byte(`{"schema":"qinglong/deployment-receipt@v2"}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(data)
		if err != nil {
			return
		}
		out, err := r.Bytes()
		if err != nil {
			t.Fatalf("accepted receipt does not serialise: %v", err)
		}
		if !bytes.Equal(out, data) {
			t.Fatalf("accepted %q but serialises to %q", data, out)
		}
	})
}

// FuzzParseSignature: ParseSignature never panics, and what it accepts is
// canonical.
func FuzzParseSignature(f *testing.F) {
	r := newReceipt().sealed(f)
	f.Add(mustSign(f, r, testKey(1)))
	f.Add(mustBytes(f, r))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSignature(data)
		if err != nil {
			return
		}
		out, err := canon.Canonical(s)
		if err != nil || !bytes.Equal(out, data) {
			t.Fatalf("accepted %q but serialises to %q (%v)", data, out, err)
		}
	})
}

// FuzzSealStrings: any strings in the free-text fields either make Seal
// fail, or give a receipt that Parse reads back equal — the encoder and
// RFC 8785 agree on every string.
func FuzzSealStrings(f *testing.F) {
	f.Add("name", "ns", "kubectl-ql3")
	f.Add("a\"b\\c\u2028\u00e9<&>\x01\x7f😀", "\x00", "\ufeff\U0010ffff")
	f.Add("\xff", "", "\xed\xa0\x80")
	f.Fuzz(func(t *testing.T, name, ns, tool string) {
		b := newReceipt().with(func(r *Receipt) {
			r.Inventory = append(r.Inventory, canon.Identity{APIVersion: "x/v1", Kind: "K", Namespace: ns, Name: name})
			canon.SortIdentities(r.Inventory)
			r.Deployment.InventoryCount = len(r.Inventory)
			r.Deployment.InventoryDigest, _ = canon.InventoryDigest(r.Inventory)
			r.Tool.Name = tool
		})
		r := b.r
		if err := r.Seal(); err != nil {
			return
		}
		data, err := r.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(data)
		if err != nil {
			t.Fatalf("sealed receipt rejected: %v", err)
		}
		if diff := cmp.Diff(&r, back); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
	})
}
