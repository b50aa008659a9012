package approval

import (
	"context"
	"strings"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// verb is the command that records each decision, for its progress line.
var verb = map[string]string{record.Approved: "approve", record.Rejected: "reject"}

// DecideRequest is `kubectl ql3 approve` and `kubectl ql3 reject`.
type DecideRequest struct {
	// Record is the path of the preflight record the approver reviewed.
	Record string
	// Decision is record.Approved or record.Rejected.
	Decision string
	Reason   string
	// Review, when set (--release), is the release the approver reviewed:
	// checked against the record, and its changes shown, before anything
	// is written. Without it only digests are compared, and the result
	// says what was not checked.
	Review *ReviewRequest
	// Say reports progress (stderr); Show says what is decided, before
	// the write.
	Say, Show cas.Progress
}

// Decide approves or rejects the namespace's pending approval of the
// record at req.Record in the caller's name: the object must be for
// exactly that record (preflight and command digests, expected Head), the
// Head still that Head, and the caller not its proposer nor a
// ServiceAccount. With req.Review the release the approver reviewed is
// rendered and verified against the record (and the deployed one against
// the Head) before anything else is read or written, and its changes are
// in the result; a release that is not the record's is invalid input
// (exit 2), nothing written. Without it the result (and a progress line)
// says the content was not checked. The update carries the
// resourceVersion just validated; a lost answer or a 409 is settled by
// reading: our exact decision is a success, anyone else's a conflict
// naming them.
func Decide(ctx context.Context, c Clients, req DecideRequest) (*Result, error) {
	if req.Decision != record.Approved && req.Decision != record.Rejected {
		return nil, fail.Errorf(fail.Invalid, "decision %q, want %q or %q", req.Decision, record.Approved, record.Rejected)
	}
	if err := record.CheckReason(req.Reason); err != nil {
		return nil, fail.Errorf(fail.Invalid, "--reason: %v", err)
	}
	s, me, err := loadAs(ctx, c, req.Record)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(me, record.ServiceAccountPrefix) {
		return nil, fail.Errorf(fail.Invalid, "you are %s, a ServiceAccount: an approval is a person's decision; run it with your own credentials", me)
	}
	checked := req.Review != nil
	var reviewed *Reviewed
	if checked {
		if reviewed, err = reviewRelease(c, s, req.Review); err != nil {
			return nil, err
		}
		req.Show.Printf("%s: content checked: %s", verb[req.Decision], reviewed.Verified)
		if req.Review.Show != nil {
			req.Review.Show(reviewed)
		}
	} else {
		req.Show.Printf("%s: %s", verb[req.Decision], notChecked(verb[req.Decision]))
	}
	r, err := decide(ctx, c, s, me, req)
	if err != nil {
		return nil, err
	}
	r.ContentChecked, r.Review = &checked, reviewed
	if !checked {
		r.NotChecked = notChecked(verb[req.Decision])
	}
	return r, nil
}

// decide is Decide's read, checks and write, once the caller and the
// release (when given) are checked.
func decide(ctx context.Context, c Clients, s Subject, me string, req DecideRequest) (*Result, error) {
	cm, cur, present, err := gate.Read(ctx, c.CS, s.Namespace)
	if err != nil {
		return nil, err
	}
	what := gate.What(s.Namespace)
	want := cur.Decided(req.Decision, me, req.Reason)
	switch {
	case !present:
		return nil, fail.Errorf(fail.Invalid, "%s: absent: nothing is proposed; the proposer runs kubectl ql3 propose --preflight %s", what, req.Record)
	case cur.PreflightDigest != s.PreflightDigest || cur.CommandDigest != s.CommandDigest || cur.ExpectedHead != s.ExpectedHead:
		return nil, fail.Errorf(fail.Conflict, "%s: %s, not of %s (preflight %s): review the record that was proposed, or ask for this one to be proposed", what, describe(cm, true), req.Record, s.PreflightDigest)
	case cur.Proposer == me:
		return nil, fail.Errorf(fail.Invalid, "%s: you (%s) proposed this preflight: the two-person rule needs another person to decide it", what, me)
	case cur.Decision != record.Pending && landed(want)(cm):
		return result(s, "replayed", cm, cur), nil
	case cur.Decision != record.Pending:
		return nil, fail.Errorf(fail.Conflict, "%s: %s: a decision is final; a new decision needs a new proposal", what, describe(cm, true))
	}
	req.Show.Printf("%s: %s %s in namespace %s, preflight %s (command %s), expected head %s, proposed by %s, as %s", verb[req.Decision], s.Transition, s.Version, s.Namespace, s.PreflightDigest, s.CommandDigest, s.ExpectedHead, cur.Proposer, me)

	if err := review(ctx, c, []access.Access{{Verb: "update", Resource: "configmaps", Namespace: s.Namespace, Name: record.Name}}, RoleApprover); err != nil {
		return nil, err
	}
	got, err := write(ctx, c, s.Namespace, cm, want, req.Say)
	if err != nil {
		return nil, err
	}
	r := result(s, req.Decision, got.Object, want)
	r.Settled = got.Settled
	return r, nil
}
