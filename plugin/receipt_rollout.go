package plugin

import (
	"fmt"
	"path/filepath"
	"strings"

	"k8s.io/cli-runtime/pkg/printers"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/receipts"
	"github.com/qinglong/kubectl-ql3/receipts/rollout"
)

// rolloutPaths says whether the audit's paths are rollout receipts (every
// one, by its file name) rather than deployment receipts; a mix is
// refused.
func (o *receiptAuditOptions) rolloutPaths() (bool, error) {
	n := 0
	for _, p := range o.paths {
		if rollout.IsFileName(filepath.Base(p)) {
			n++
		}
	}
	switch {
	case n == 0:
		return false, nil
	case n < len(o.paths):
		return false, fail.Errorf(fail.Invalid, "give either rollout receipts (rollout-<digest>.json) or deployment receipts, not both: each rollout receipt audits its targets' receipts itself")
	case o.release != "" || o.fromGeneration != 1:
		return false, fail.Errorf(fail.Invalid, "--release and --from-generation apply to deployment receipts, not to a rollout receipt")
	}
	return true, nil
}

// runRollout audits each rollout receipt with its targets' receipts
// (docs/fleet.md §8.4).
func (o *receiptAuditOptions) runRollout(keys receipts.TrustedKeys) error {
	var reps []*rollout.Report
	bad := 0
	for _, p := range o.paths {
		rep, err := rollout.Audit(p, keys)
		if err != nil {
			return err
		}
		if !rep.OK() {
			bad++
		}
		reps = append(reps, rep)
	}
	var err error
	if o.output != "" {
		err = printObject(o.streams.Out, o.output, map[string]any{"rollouts": reps})
	} else {
		err = printRolloutAudit(o, reps)
	}
	if err != nil {
		return err
	}
	if bad > 0 {
		return fail.Errorf(fail.Tamper, "receipt audit failed: %d of %d rollout receipts failed", bad, len(reps))
	}
	return nil
}

func printRolloutAudit(o *receiptAuditOptions, reps []*rollout.Report) error {
	for _, rep := range reps {
		fmt.Fprintf(o.streams.Out, "rollout receipt: %s\nplan: %s, outcome %s, attestation %s\n", rep.File, rep.Plan, rep.Outcome, rep.Attestation)
		for _, r := range rep.Reasons {
			fmt.Fprintf(o.streams.Out, "  - %s\n", r)
		}
		w := printers.GetNewTabWriter(o.streams.Out)
		fmt.Fprintln(w, "WAVE\tTARGET\tSTATE\tRECEIPT\tVERDICT\tREASONS")
		for _, t := range rep.Targets {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", t.Wave, t.Name, t.State, dashed(t.Receipt), t.Verdict, dashed(strings.Join(t.Reasons, "; ")))
		}
		if err := w.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(o.streams.Out, "verdict: %s\n", rep.Verdict)
	}
	return nil
}

func dashed(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
