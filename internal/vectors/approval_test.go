package vectors

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
)

// TestApprovalVectors runs testdata/vectors/approval against the
// approval object's reader (docs/approval.md §1, gate.Parse, which every
// reader uses): each rule broken is tamper; an accepted object's values
// are its data's, read here a second way (plain JSON).
func TestApprovalVectors(t *testing.T) {
	each(t, "approval", map[string]procedure{"approval-configmap": func(t *testing.T, v vector, input []byte) {
		var cm corev1.ConfigMap
		if err := yaml.UnmarshalStrict(input, &cm); err != nil {
			t.Fatal(err)
		}
		a, err := gate.Parse(&cm)
		verdict(t, v, err)
		if err != nil {
			return
		}
		var raw struct {
			Data map[string]string `json:"data"`
		}
		if err := json.Unmarshal(input, &raw); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{"preflightDigest": a.PreflightDigest, "commandDigest": a.CommandDigest, "expectedHead": a.ExpectedHead,
			"proposer": a.Proposer, "decision": a.Decision, "approver": a.Approver, "reason": a.Reason}
		for k, want := range got {
			if raw.Data[k] != want {
				t.Errorf("%s: parsed %q, the object's data holds %q", k, want, raw.Data[k])
			}
		}
	}})
}
