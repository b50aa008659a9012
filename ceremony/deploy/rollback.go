package deploy

import (
	"context"
	"fmt"
)

// RunRollback is `kubectl ql3 rollback DIR`: the preflight of the
// transition rollback (its record written, never replaced, so that a crash
// can be resumed), then the apply of the release that preflight rendered
// and verified, as is: one render per rollback. An apply that fails names
// the record and the resume that continues it; one the two-person rule's
// gate refused (nothing acquired) names the apply that applies the record
// once approved.
func RunRollback(ctx context.Context, o Options, req PreflightRequest) (*ApplyResult, error) {
	req.Transition = TransitionRollback
	pf, err := RunPreflight(ctx, o, req)
	if err != nil {
		return nil, err
	}
	res, err := RunApply(ctx, o, pf.ApplyRequest())
	if isGateRefusal(err) {
		return nil, fmt.Errorf("%w (preflight record %s, the Head not acquired: once another person approved this record, `kubectl ql3 apply --preflight %s` applies it)", err, pf.Path, pf.Path)
	}
	if err != nil {
		return nil, fmt.Errorf("%w (preflight record %s: `kubectl ql3 resume --preflight %s` continues)", err, pf.Path, pf.Path)
	}
	return res, nil
}
