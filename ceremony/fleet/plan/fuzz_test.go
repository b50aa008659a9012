package plan

import (
	"bytes"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// FuzzParse: Parse never panics, refuses with fail.Invalid or fail.Tamper
// only, and what it accepts is exactly the canonical bytes it writes back.
func FuzzParse(f *testing.F) {
	valid := validPlan(f)
	data, err := valid.Bytes()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add(bytes.TrimSuffix(data, []byte("\n")))
	f.Add([]byte(strings.Replace(string(data), `"maxParallel":2`, `"maxParallel":3`, 1)))
	for _, s := range []string{"{}", "[]", `{"schema":null}`, "null", `{"waves":[{"targets":[{}]}]}`, "\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz", data)
		if err != nil {
			if c := fail.ClassOf(err); c != fail.Invalid && c != fail.Tamper {
				t.Fatalf("class %v: %v", c, err)
			}
			return
		}
		out, err := p.Bytes()
		if err != nil {
			t.Fatalf("accepted but not writable: %v", err)
		}
		if !bytes.Equal(bytes.TrimSuffix(out, []byte("\n")), bytes.TrimSuffix(data, []byte("\n"))) {
			t.Fatalf("accepted bytes that are not its own:\n%s\n%s", data, out)
		}
		if err := p.check(); err != nil {
			t.Fatalf("accepted a plan that breaks a rule: %v", err)
		}
	})
}
