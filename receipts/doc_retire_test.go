package receipts

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// exampleDigest is the digest docs/receipts.md §6.2 gives every member of
// the retire example that digests a record not shown: D("example", name).
func exampleDigest(name string) string { return canon.DigestBytes("example", []byte(name)) }

// retireExample builds docs/receipts.md §6.2 from the worked example of
// §6 (generation 2) and the inputs the section states.
func retireExample(t *testing.T, prev *Receipt) *Receipt {
	t.Helper()
	var kept []canon.Identity
	var retired []Retired
	for _, id := range prev.Inventory {
		if id.Name == "worker" {
			retired = append(retired, Retired{ID: id, UID: "7f0c2a55-3b1e-4d7a-9c41-0e6f2b8d9a13", ResourceVersion: "48151", Outcome: OutcomeDeleted})
			continue
		}
		kept = append(kept, id)
	}
	invDigest, err := canon.InventoryDigest(kept)
	if err != nil {
		t.Fatal(err)
	}
	r := &Receipt{
		Schema: Schema, Generation: 3,
		Transition: Transition{Kind: KindRetire, CommandDigest: exampleDigest("transition.commandDigest"), PreflightDigest: exampleDigest("transition.preflightDigest")},
		Deployment: Deployment{Version: "3.2.0", LockDigest: exampleDigest("deployment.lockDigest"), InventoryDigest: invDigest, InventoryCount: len(kept)},
		Inventory:  kept, PreviousDeployment: &prev.Deployment, PreviousReceiptDigest: prev.SelfDigest,
		Target: prev.Target, Tool: prev.Tool,
		Steps: Steps{Identity: prev.Steps.Identity, DryRun: exampleDigest("steps.dryRun"), Apply: exampleDigest("steps.apply"),
			Converge: exampleDigest("steps.converge"), FinalIdentity: prev.Steps.FinalIdentity},
		Flags: ExpectedFlags, Retired: retired,
	}
	view := map[string]any{
		"generation": r.Generation, "transition": r.Transition, "current": r.Deployment,
		"previous": r.PreviousDeployment, "target": r.Target, "tool": r.Tool,
		"previousReceiptDigest": r.PreviousReceiptDigest,
	}
	if r.Head.DeploymentDigest, err = canon.DigestOf(canon.DomainDeployment, view); err != nil {
		t.Fatal(err)
	}
	r.Head.StateDigest = exampleDigest("head.stateDigest")
	if err := r.Seal(); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestDocRetireExample recomputes the retire example of docs/receipts.md
// §6.2 and audits it as the next link of the §6 example's chain.
func TestDocRetireExample(t *testing.T) {
	ex := docExamples(t)
	prevData, err := jcs.Transform([]byte(ex["receipt"]))
	if err != nil {
		t.Fatal(err)
	}
	prev, err := Parse(prevData)
	if err != nil {
		t.Fatal(err)
	}
	want := retireExample(t, prev)
	wantBytes, err := want.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	var indented bytes.Buffer
	_ = json.Indent(&indented, wantBytes, "", "  ")
	doc, ok := ex["retire-receipt"]
	if !ok {
		t.Fatalf("docs/receipts.md has no example \"retire-receipt\"; it should be:\n%s", indented.String())
	}
	got, err := jcs.Transform([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, wantBytes) {
		t.Fatalf("the retire example differs from the one computed from its inputs; it should be:\n%s", indented.String())
	}
	if name := FileName(want); name != ex["retire-file-name"] {
		t.Errorf("file name %q, doc says %q", name, ex["retire-file-name"])
	}
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, FileName(prev)), prevData, 0o644)
	_ = os.WriteFile(filepath.Join(dir, FileName(want)), wantBytes, 0o644)
	if rep := mustAudit(t, []string{dir}, AuditOptions{BaseGeneration: 2}); !rep.OK() {
		t.Fatalf("audit of the example chain:\n%s", failures(rep))
	}

	// The chain rule inventory(N) = inventory(N-1) - retired, both ways.
	for _, tc := range []struct {
		name string
		edit func(r *Receipt)
	}{
		{"kept object listed as retired", func(r *Receipt) { r.Retired[0].ID.Name = "control" }},
		{"retired object never deployed", func(r *Receipt) { r.Retired[0].ID.Name = "batch" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := retireExample(t, prev)
			tc.edit(bad)
			if err := bad.Seal(); err != nil {
				t.Fatal(err)
			}
			data, err := bad.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			d := t.TempDir()
			_ = os.WriteFile(filepath.Join(d, FileName(prev)), prevData, 0o644)
			_ = os.WriteFile(filepath.Join(d, FileName(bad)), data, 0o644)
			rep, err := Audit([]string{d}, AuditOptions{BaseGeneration: 2})
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() || rep.Chain.Verdict != VerdictFail {
				t.Fatalf("audit accepted a retire that breaks inventory(N) = inventory(N-1) - retired: %+v", rep.Chain)
			}
			t.Log(rep.Chain.Reasons)
		})
	}
}
