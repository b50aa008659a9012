package vectors

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/receipts/rollout"
)

// TestRolloutVectors runs testdata/vectors/rollout against receipts/rollout
// (docs/fleet.md §8): rollout receipts read strictly (rollout.Parse); an
// accepted one's selfDigest recomputed a second way, from the bytes by
// the formula of §8.2, and its file name.
func TestRolloutVectors(t *testing.T) {
	each(t, "rollout", map[string]procedure{
		"rollout-receipt": func(t *testing.T, v vector, input []byte) {
			r, err := rollout.Parse(input)
			verdict(t, v, err)
			if err != nil {
				return
			}
			var doc map[string]json.RawMessage
			if err := json.Unmarshal(input, &doc); err != nil {
				t.Fatal(err)
			}
			delete(doc, "selfDigest")
			unsealed, _ := json.Marshal(doc)
			want := domainDigest("rollout-receipt", "v1", canonical(t, unsealed))
			digests(t, v, map[string]string{"selfDigest": want, "fileName": "rollout-" + strings.TrimPrefix(want, "sha256:") + ".json"},
				map[string]string{"selfDigest": r.SelfDigest, "fileName": rollout.FileName(r)})
		},
	})
}
