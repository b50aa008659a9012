package deploy

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// RunPreflightApply is `kubectl ql3 preflight --apply`: the preflight (its
// record written, never replaced, so that a crash can be resumed), then the
// apply of the release that preflight rendered and verified, as is, in the
// same process: one render, one client, one process start, and every check
// of both steps. An apply that fails names the record and the resume that
// continues it; one the two-person rule's gate refused (nothing acquired)
// names the apply that applies the record once approved.
func RunPreflightApply(ctx context.Context, o Options, req PreflightRequest) (*ApplyResult, error) {
	// The receipt's directory is checked before the record is written, so
	// that a bad --receipts-dir leaves nothing behind.
	dir, err := filepath.Abs(req.Dir)
	if err != nil {
		return nil, fail.Wrap(fail.Invalid, err)
	}
	if err := checkReceiptsDir(o.receiptsDir(dir)); err != nil {
		return nil, err
	}
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

// RunRollback is `kubectl ql3 rollback DIR`: RunPreflightApply with the
// transition rollback.
func RunRollback(ctx context.Context, o Options, req PreflightRequest) (*ApplyResult, error) {
	req.Transition = TransitionRollback
	return RunPreflightApply(ctx, o, req)
}
