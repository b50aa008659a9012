package deploy

import (
	"testing"

	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// FuzzHeadDigestStreamed: the Head's state and self digests, the
// inventory hashed one identity at a time into the rest, are those of the
// whole document canonicalised at once, whatever the names (quotes,
// control characters, invalid UTF-8, the array placeholder itself), with
// or without a retired list, with an empty inventory or none.
func FuzzHeadDigestStreamed(f *testing.F) {
	f.Add("cm-00001", "ns", "1.0.0", false, 3)
	f.Add("a\"b\\c\x00\u2028<&>", "\xff", "kubectl-ql3 array placeholder \ufffe", true, 1)
	f.Add("x", "", "", false, 0)
	f.Fuzz(func(t *testing.T, name, ns, version string, retire bool, n int) {
		n = min(max(n, -1), 50)
		var inv []inventory.Identity
		for i := range n {
			inv = append(inv, inventory.Identity{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: name + string(rune('a'+i%26))})
		}
		if n == 0 {
			inv = []inventory.Identity{}
		}
		h := upgradeHead(t, []inventory.Identity{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "cm"}})
		h.Current.Inventory, h.Current.Version = inv, version
		if retire {
			h.Retired = []receipts.Retired{{ID: inventory.Identity{APIVersion: "v1", Kind: "Secret", Namespace: ns, Name: name}, UID: name, ResourceVersion: "7", Outcome: "deleted"}}
		}
		for _, drop := range [][]string{{"stateDigest", "selfDigest"}, {"selfDigest"}} {
			want, werr := digestWithout(inventory.DomainHead, h, drop...)
			got, gerr := h.digestWithout(inventory.DomainHead, drop...)
			if (werr == nil) != (gerr == nil) || got != want {
				t.Fatalf("without %q: streamed %s (%v), whole %s (%v)", drop, got, gerr, want, werr)
			}
		}
	})
}
