package delivery

import (
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// FuzzParse: Parse never panics, refuses with fail.Invalid only, and what
// it accepts validates and parses again to the same delivery through its
// canonical JSON.
func FuzzParse(f *testing.F) {
	for _, s := range []string{goodYAML, goodJSON, "{}", "a: b", "[1]", `{"schema":null}`, "\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse(data)
		if err != nil {
			if !fail.Is(err, fail.Invalid) {
				t.Fatalf("not invalid: %v", err)
			}
			return
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("accepted an invalid delivery: %v", err)
		}
		c, err := Canonical(d)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(c)
		if err != nil {
			t.Fatalf("canonical form does not parse: %v\n%s", err, c)
		}
		a, _ := DeliveryDigest(d)
		b, _ := DeliveryDigest(again)
		if a != b {
			t.Fatalf("round trip changed the delivery: %s", c)
		}
	})
}
