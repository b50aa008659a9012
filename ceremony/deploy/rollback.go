package deploy

import (
	"context"
	"errors"
	"fmt"
)

// RunPreflightApply is `kubectl ql3 preflight --apply`: the preflight (its
// record written, never replaced, so that a crash can be resumed; the
// receipts directory checked writable before it is), then the apply of
// the release that preflight rendered and verified, as is, in the same
// process: one render, one client, one process start, and every check of
// both steps. An apply that fails after it acquired the Head names the
// resume that continues it; one the two-person rule's gate refused
// (nothing acquired) names the apply that applies the record once
// approved; any other names the record.
func RunPreflightApply(ctx context.Context, o Options, req PreflightRequest) (*ApplyResult, error) {
	req.thenApply = true
	pf, err := RunPreflight(ctx, o, req)
	if err != nil {
		return nil, err
	}
	res, err := RunApply(ctx, o, pf.ApplyRequest())
	if err != nil {
		return nil, applyOfRecordFailed(err, pf.Path)
	}
	return res, nil
}

// applyOfRecordFailed says where an apply of the record at path that
// failed leaves its operator: after the Head was acquired, resume
// continues it; refused by the two-person rule's gate (nothing acquired),
// the record is applied once approved; otherwise the error's own advice
// stands, and the record is named.
func applyOfRecordFailed(err error, path string) error {
	var acquired acquiredFailure
	switch {
	case isGateRefusal(err):
		return fmt.Errorf("%w (preflight record %s, the Head not acquired: once another person approved this record, `kubectl ql3 apply --preflight %s` applies it)", err, path, path)
	case errors.As(err, &acquired):
		return fmt.Errorf("%w (preflight record %s, the Head applying it: `kubectl ql3 resume --preflight %s` continues)", err, path, path)
	default:
		return fmt.Errorf("%w (preflight record %s)", err, path)
	}
}

// RunRollback is `kubectl ql3 rollback DIR`: RunPreflightApply with the
// transition rollback.
func RunRollback(ctx context.Context, o Options, req PreflightRequest) (*ApplyResult, error) {
	req.Transition = TransitionRollback
	return RunPreflightApply(ctx, o, req)
}
