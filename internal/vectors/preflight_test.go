package vectors

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
)

// TestPreflightVectors runs testdata/vectors/preflight against
// deploy.ParsePreflight, the reader apply and resume use (docs/head.md §4).
func TestPreflightVectors(t *testing.T) {
	each(t, "preflight", map[string]procedure{"preflight": func(t *testing.T, v vector, input []byte) {
		p, err := deploy.ParsePreflight(v.Input, input)
		verdict(t, v, err)
		if err != nil {
			return
		}
		rec := jsonValue(t, bytes.TrimSuffix(input, []byte("\n"))).(map[string]any)
		cmd, _ := json.Marshal(rec["command"])
		delete(rec, "selfDigest")
		self, _ := json.Marshal(rec)
		want := map[string]string{
			"commandDigest":   domainDigest("command", "v1", canonical(t, cmd)),
			"preflightDigest": domainDigest("preflight", "v1", canonical(t, self)),
		}
		digests(t, v, want, map[string]string{"commandDigest": p.CommandDigest, "preflightDigest": p.SelfDigest})
	}})
}
