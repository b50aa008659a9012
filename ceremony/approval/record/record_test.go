package record_test

import (
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

func valid() record.Object {
	a := record.Approval{PreflightDigest: "sha256:" + strings.Repeat("a", 64), CommandDigest: "sha256:" + strings.Repeat("b", 64),
		ExpectedHead: "ql3h1-2-" + strings.Repeat("c", 64) + "-" + strings.Repeat("d", 64) + "-" + strings.Repeat("e", 64),
		Proposer:     "alice", Decision: record.Pending}
	return record.Object{Name: record.Name, Labels: record.Labels(), Data: a.Data()}
}

// Every deviation from docs/approval.md §1 is tamper (exit 5), naming
// what is wrong; the valid shapes read back as written.
func TestParse(t *testing.T) {
	set := func(k, v string) func(o *record.Object) { return func(o *record.Object) { o.Data[k] = v } }
	cases := []struct {
		name string
		edit func(o *record.Object)
		want string // "" valid
	}{
		{"pending", func(*record.Object) {}, ""},
		{"approved by another", func(o *record.Object) {
			set("decision", "approved")(o)
			set("approver", "bob")(o)
			set("reason", "ok")(o)
		}, ""},
		{"install token", set("expectedHead", "ql3h1-0-none"), ""},
		{"another name", func(o *record.Object) { o.Name = "x" }, `name "x"`},
		{"a third label", func(o *record.Object) { o.Labels["x"] = "y" }, "labels"},
		{"binaryData", func(o *record.Object) { o.BinaryDataKeys = 1 }, "binaryData"},
		{"immutable", func(o *record.Object) { o.Immutable = true }, "immutable"},
		{"an extra key", set("extra", ""), `unknown ["extra"]`},
		{"a missing key", func(o *record.Object) { delete(o.Data, "reason") }, `missing ["reason"]`},
		{"another schema", set("schema", "v2"), `schema "v2"`},
		{"a bad digest", set("preflightDigest", "sha256:AB"), "preflightDigest"},
		{"a bad token", set("expectedHead", "ql3h1-1-x"), "expectedHead"},
		{"no proposer", set("proposer", ""), "proposer is empty"},
		{"pending with an approver", set("approver", "bob"), "pending approval has an approver"},
		{"another decision", set("decision", "maybe"), `decision "maybe"`},
		{"self-approval", func(o *record.Object) { set("decision", "approved")(o); set("approver", "alice")(o) }, "by its own proposer"},
		{"approved without approver", set("decision", "approved"), "without an approver"},
		{"ServiceAccount approver", func(o *record.Object) {
			set("decision", "rejected")(o)
			set("approver", "system:serviceaccount:a:b")(o)
		}, "ServiceAccount"},
		{"a control character", func(o *record.Object) {
			set("decision", "rejected")(o)
			set("approver", "bob")(o)
			set("reason", "a\tb")(o)
		}, "control character"},
		{"a reason too long", func(o *record.Object) {
			set("decision", "rejected")(o)
			set("approver", "bob")(o)
			set("reason", strings.Repeat("é", 513))(o)
		}, "1026 bytes, at most 1024"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := valid()
			c.edit(&o)
			a, err := record.Parse(o)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want == "" && a.Data()[record.KeyDecision] != o.Data[record.KeyDecision]:
				t.Fatalf("read %+v from %v", a, o.Data)
			case c.want != "" && (!fail.Is(err, fail.Tamper) || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want tamper naming %q", err, c.want)
			}
		})
	}
}
