package deploy_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// docBlocks reads the fenced blocks marked "<!-- example:NAME -->" out of a
// file of docs/.
func docBlocks(t *testing.T, file string) map[string]string {
	t.Helper()
	return testkit.DocExamples(t, file)
}

// docExampleMutationID is the mutation id docs/head.md §9 gives its Head.
const docExampleMutationID = "000102030405060708090a0b0c0d0e0f"

// TestDocHeadExample recomputes docs/head.md §9: the committed Head whose
// receipt is the worked example of docs/receipts.md §6. Its deployment
// digest must be the one that receipt states (the formula leaves the
// mutation id out), its receipt must be that receipt but for the state
// digest (which there is a digest of a record not shown), and the state
// and self digests are recomputed here a second way, straight from the
// canonical text of the doc's Head, not through Head.Seal.
func TestDocHeadExample(t *testing.T) {
	rex := docBlocks(t, "receipts.md")
	data, err := jcs.Transform([]byte(rex["receipt"]))
	if err != nil {
		t.Fatal(err)
	}
	r, err := receipts.Parse(data)
	if err != nil {
		t.Fatalf("docs/receipts.md §6: %v", err)
	}
	h := &deploy.Head{
		Schema: deploy.HeadSchema, Phase: deploy.PhaseCommitted, Generation: r.Generation,
		Transition:            deploy.HeadTransition{Transition: r.Transition, MutationID: docExampleMutationID},
		Current:               deploy.HeadDeployment{Deployment: r.Deployment, Inventory: r.Inventory},
		Previous:              r.PreviousDeployment,
		Target:                r.Target,
		Tool:                  r.Tool,
		Steps:                 r.Steps,
		PreviousReceiptDigest: r.PreviousReceiptDigest,
	}
	if err := h.Seal(); err != nil {
		t.Fatal(err)
	}
	if h.DeploymentDigest != r.Head.DeploymentDigest {
		t.Fatalf("deploymentDigest %s, but docs/receipts.md §6 states %s", h.DeploymentDigest, r.Head.DeploymentDigest)
	}
	raw, err := h.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deploy.ParseHead(raw); err != nil {
		t.Fatalf("the example Head does not validate: %v", err)
	}
	var indented bytes.Buffer
	_ = json.Indent(&indented, raw, "", "  ")
	want := map[string]string{
		"head":              indented.String(),
		"head-size":         itoa(len(raw)),
		"head-state-digest": h.StateDigest,
		"head-self-digest":  h.SelfDigest,
		"head-token":        h.Expected().String(),
	}
	ex := docBlocks(t, "head.md")
	for _, name := range []string{"head", "head-size", "head-state-digest", "head-self-digest", "head-token"} {
		if ex[name] != want[name] {
			t.Errorf("docs/head.md example %q is\n%s\nit should be:\n%s", name, ex[name], want[name])
		}
	}

	// The second way: from the doc's own text, by the formulas of §2.
	text, err := jcs.Transform([]byte(ex["head"]))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(text, raw) {
		t.Fatalf("the doc's Head is not the computed one")
	}
	var m map[string]any
	if err := json.Unmarshal(text, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "selfDigest")
	if got := canonDigest(t, "head", m); got != ex["head-self-digest"] {
		t.Errorf("selfDigest from the text: %s, doc says %s", got, ex["head-self-digest"])
	}
	delete(m, "stateDigest")
	if got := canonDigest(t, "head-state", m); got != ex["head-state-digest"] {
		t.Errorf("stateDigest from the text: %s, doc says %s", got, ex["head-state-digest"])
	}

	// Its receipt is docs/receipts.md §6 with this Head's state digest.
	got, err := deploy.ReceiptFromHead(h)
	if err != nil {
		t.Fatal(err)
	}
	r.Head.StateDigest = h.StateDigest
	if err := r.Seal(); err != nil {
		t.Fatal(err)
	}
	if got.SelfDigest != r.SelfDigest {
		t.Errorf("the example Head's receipt differs from docs/receipts.md §6 in more than head.stateDigest")
	}
}

func canonDigest(t *testing.T, domain string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	c, err := jcs.Transform(b)
	if err != nil {
		t.Fatal(err)
	}
	return canon.DigestBytes(domain, c)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
