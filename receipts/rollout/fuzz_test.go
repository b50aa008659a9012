package rollout

import (
	"bytes"
	"os"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// FuzzParse: Parse never panics, refuses with fail.Tamper only, and what
// it accepts is exactly the canonical bytes of what it read, whose rules
// hold.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"rollout.json", "after-stop.json", "not-canonical.json", "target-twice.json"} {
		data, err := os.ReadFile("../../testdata/vectors/rollout/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(data)
		if err != nil {
			if fail.ClassOf(err) != fail.Tamper {
				t.Fatalf("class %v: %v", fail.ClassOf(err), err)
			}
			return
		}
		out, err := canon.Canonical(r)
		if err != nil || !bytes.Equal(out, data) {
			t.Fatalf("accepted bytes that are not its own: %v", err)
		}
		if err := r.check(); err != nil {
			t.Fatalf("accepted a receipt that breaks a rule: %v", err)
		}
	})
}
