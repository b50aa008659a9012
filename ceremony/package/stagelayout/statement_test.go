package stagelayout_test

import (
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/package/stagelayout"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// The statement is read by the module's one strict JSON reader: what it
// refuses, a stage receipt refuses, as a conflict naming the member.
func TestParseStatementStrict(t *testing.T) {
	valid := `{"adapterEvidenceDigest":"sha256:` + strings.Repeat("a", 64) + `","contentDigest":"sha256:` + strings.Repeat("b", 64) +
		`","lockDigest":"sha256:` + strings.Repeat("c", 64) + `","schema":"qinglong/plugin-package-stage-receipt@v1","signature":"` +
		strings.Repeat("A", 86) + `==","stageReference":"registry.example.com/p@sha256:` + strings.Repeat("d", 64) + `"}`
	if _, err := stagelayout.ParseStatement([]byte(valid)); err != nil {
		t.Fatalf("the valid statement: %v", err)
	}
	for _, c := range []struct{ name, data, want string }{
		{"not UTF-8", strings.Replace(valid, `"schema"`, "\"sch\xffema\"", 1), "not UTF-8"},
		{"a member twice", strings.Replace(valid, `{"adapterEvidenceDigest"`, `{"schema":"x","adapterEvidenceDigest"`, 1), `member "schema" appears twice`},
		{"an unknown member", strings.Replace(valid, `{"adapterEvidenceDigest"`, `{"extra":"x","adapterEvidenceDigest"`, 1), `unknown member "extra"`},
		{"a member missing", strings.Replace(valid, `"lockDigest":"sha256:`+strings.Repeat("c", 64)+`",`, "", 1), `member "lockDigest" is missing`},
		{"a number", strings.Replace(valid, `"signature":"`+strings.Repeat("A", 86)+`=="`, `"signature":1`, 1), "signature is not a JSON string"},
		{"data after it", valid + "{}", "data after the JSON object"},
	} {
		if c.data == valid {
			t.Fatalf("%s: the mutation changed nothing", c.name)
		}
		_, err := stagelayout.ParseStatement([]byte(c.data))
		if !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v (class %v), want a conflict containing %q", c.name, err, fail.ClassOf(err), c.want)
		}
	}
}
