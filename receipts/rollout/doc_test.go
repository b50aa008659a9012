package rollout_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/qinglong/kubectl-ql3/internal/testkit"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
	"github.com/qinglong/kubectl-ql3/receipts"
	"github.com/qinglong/kubectl-ql3/receipts/rollout"
)

var examples = []string{"rollout-receipt", "rollout-digest", "rollout-file-name", "rollout-subjects"}

// TestDocRolloutExample recomputes docs/fleet.md §8.5: the rollout
// receipt of a run of the plan of §5 — dev-a committed, prod-eu committed
// with its approval, prod-us refused (its Head moved) — built from the
// plan's own text and the values the doc states, then its digest a
// second way, from the doc's text by the formula of §8.2.
func TestDocRolloutExample(t *testing.T) {
	ex := testkit.DocExamples(t, "fleet.md", append(examples, "plan")...)
	r := exampleReceipt(t, ex["plan"])
	data, err := r.Seal()
	if err != nil {
		t.Fatal(err)
	}
	var indented bytes.Buffer
	_ = json.Indent(&indented, data, "", "  ")
	subjects := ""
	for _, s := range rollout.Subjects(r, data) {
		subjects += s.Name + " " + s.SHA256 + "\n"
	}
	want := map[string]string{"rollout-receipt": indented.String(), "rollout-digest": r.SelfDigest,
		"rollout-file-name": rollout.FileName(r), "rollout-subjects": subjects[:len(subjects)-1]}
	for _, name := range examples {
		if ex[name] != want[name] {
			t.Errorf("docs/fleet.md example %q is\n%s\nit should be:\n%s", name, ex[name], want[name])
		}
	}
	if _, err := rollout.Parse(data); err != nil {
		t.Fatalf("the example does not parse: %v", err)
	}
	// The second way: D("rollout-receipt", JCS(the doc's JSON without selfDigest)).
	var doc map[string]any
	if err := json.Unmarshal([]byte(ex["rollout-receipt"]), &doc); err != nil {
		t.Fatal(err)
	}
	delete(doc, "selfDigest")
	raw, _ := json.Marshal(doc)
	c, err := jcs.Transform(raw)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(append([]byte("kubectl-ql3/rollout-receipt/v1\x00"), c...))
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != ex["rollout-digest"] {
		t.Errorf("rollout digest from the text: %s, doc says %s", got, ex["rollout-digest"])
	}
}

// exampleReceipt is §8.5's run of the plan whose indented JSON is planText.
func exampleReceipt(t *testing.T, planText string) *rollout.Receipt {
	t.Helper()
	var p struct {
		FleetDigest, SelfDigest string
		Tool                    receipts.Tool
		Waves                   []struct {
			Name, Gate  string
			MaxFailures int
			Targets     []rollout.Target
		}
	}
	if err := json.Unmarshal([]byte(planText), &p); err != nil {
		t.Fatal(err)
	}
	r := &rollout.Receipt{Plan: p.SelfDigest, FleetDigest: p.FleetDigest, Tool: p.Tool, Outcome: rollout.OutcomeStopped}
	for _, w := range p.Waves {
		rw := rollout.Wave{Name: w.Name, Gate: w.Gate, MaxFailures: w.MaxFailures, State: rollout.WaveDone}
		for _, pt := range w.Targets {
			tg := rollout.Target{Name: pt.Name, ClusterIdentity: pt.ClusterIdentity, Namespace: pt.Namespace, Transition: pt.Transition,
				Version: pt.Version, Generation: pt.Generation, PreflightDigest: pt.PreflightDigest, InventoryDigest: pt.InventoryDigest,
				State: rollout.TargetCommitted}
			if pt.Name == "prod-us" {
				tg.State, tg.Exit, tg.Reason = rollout.TargetFailed, 3, "target prod-us: head: moved since the preflight; run kubectl ql3 head and preflight again"
				rw.State = rollout.WaveStopped
			} else {
				tg.Receipt = exampleRef(pt.Name, pt.Generation, pt.Transition, pt.Version)
			}
			if pt.Name == "prod-eu" {
				tg.Approval = &receipts.Approval{Proposer: "alice@example.com", Approver: "bob@example.com", UID: "8d6c5f0e-1c1b-4f7a-9d43-2f0c6a1e9b52", ResourceVersion: "48213"}
			}
			rw.Targets = append(rw.Targets, tg)
		}
		r.Waves = append(r.Waves, rw)
	}
	return r
}

// exampleRef stands for a target's receipt: its digest D("example",
// "<target>.receipt") and SHA-256 that of the text "<target>.receipt".
func exampleRef(name string, gen int64, transition, version string) *rollout.Ref {
	sum := sha256.Sum256([]byte(name + ".receipt"))
	path := name + "/" + receiptFile(gen, transition, version)
	return &rollout.Ref{Path: path, Digest: canon.DigestBytes("example", []byte(name+".receipt")), SHA256: hex.EncodeToString(sum[:])}
}

func receiptFile(gen int64, transition, version string) string {
	b, _ := json.Marshal(gen)
	s := string(b)
	for len(s) < 6 {
		s = "0" + s
	}
	return s + "-" + transition + "-" + version + receipts.FileSuffix
}
