package approval

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// ProposeRequest is `kubectl ql3 propose`.
type ProposeRequest struct {
	// Record is the preflight record's path.
	Record string
	// Replace lets a still-valid proposal of another preflight (or this
	// one's rejection) be replaced.
	Replace bool
	// Say reports progress (stderr); Show says what is proposed, before
	// the write.
	Say, Show cas.Progress
}

// Propose creates the namespace's approval object for the record at
// req.Record, pending, in the caller's name as the API server
// authenticated it. The same record already proposed by the caller is a
// replay. Another object is replaced — a fenced delete (its UID and
// resourceVersion), then the create — when it is decided or was proposed
// against a Head that is gone; a pending one still valid for another
// preflight, or this record's rejection, only with req.Replace.
func Propose(ctx context.Context, c Clients, req ProposeRequest) (*Result, error) {
	s, me, err := loadAs(ctx, c, req.Record)
	if err != nil {
		return nil, err
	}
	if s.Proposer != "" && s.Proposer != me {
		return nil, fail.Errorf(fail.Invalid, "preflight %s names proposer %s, but you are %s: only the person who ran the preflight proposes it; run kubectl ql3 preflight yourself and propose that record", req.Record, s.Proposer, me)
	}
	want := record.Approval{PreflightDigest: s.PreflightDigest, CommandDigest: s.CommandDigest, ExpectedHead: s.ExpectedHead, Proposer: me, Decision: record.Pending}
	cm, cur, present, err := gate.Read(ctx, c.CS, s.Namespace)
	if err != nil {
		return nil, err
	}
	var replaced *record.Approval
	if present {
		if r, done, err := judgeExisting(s, cm, cur, me, req.Replace); done || err != nil {
			return r, err
		}
		replaced = &cur
	}
	req.Show.Printf("propose: %s %s in namespace %s, preflight %s (command %s), expected head %s, proposer %s", s.Transition, s.Version, s.Namespace, s.PreflightDigest, s.CommandDigest, s.ExpectedHead, me)
	needs := []access.Access{{Verb: "create", Resource: "configmaps", Namespace: s.Namespace}}
	if present {
		needs = append(needs, access.Access{Verb: "delete", Resource: "configmaps", Namespace: s.Namespace, Name: record.Name})
	}
	if err := review(ctx, c, needs, RoleProposer); err != nil {
		return nil, err
	}
	if present {
		req.Say.Printf("%s: replacing %s", gate.What(s.Namespace), describe(cm, true))
		if err := fencedDelete(ctx, c, s.Namespace, cm, req.Say); err != nil {
			return nil, err
		}
	}
	got, err := write(ctx, c, s.Namespace, nil, want, req.Say)
	if err != nil {
		return nil, err
	}
	r := result(s, "proposed", got.Object, want)
	if replaced != nil {
		r.Outcome, r.Replaced = "replaced", replaced
	}
	r.Settled = got.Settled
	return r, nil
}

// judgeExisting decides what to do with the approval object present:
// done with a result (a replay), refused, or go on and replace it.
func judgeExisting(s Subject, cm *corev1.ConfigMap, cur record.Approval, me string, replace bool) (*Result, bool, error) {
	same := cur.PreflightDigest == s.PreflightDigest && cur.CommandDigest == s.CommandDigest && cur.ExpectedHead == s.ExpectedHead
	switch {
	case same && cur.Proposer == me && cur.Decision != record.Rejected:
		return result(s, "replayed", cm, cur), true, nil
	case replace:
		return nil, false, nil
	case same && cur.Decision == record.Rejected:
		return nil, false, fail.Errorf(fail.Conflict, "%s: this preflight was rejected by %s (%q): pass --replace to propose it again", gate.What(s.Namespace), cur.Approver, cur.Reason)
	case same:
		return nil, false, fail.Errorf(fail.Conflict, "%s: this preflight was already proposed by %s (%s): pass --replace to propose it in your name", gate.What(s.Namespace), cur.Proposer, cur.Decision)
	case cur.Decision == record.Pending && cur.ExpectedHead == s.ExpectedHead:
		return nil, false, fail.Errorf(fail.Conflict, "%s: %s, still valid for the Head: pass --replace to replace it", gate.What(s.Namespace), "a pending proposal by "+cur.Proposer+" of preflight "+cur.PreflightDigest)
	}
	return nil, false, nil // decided, or proposed against a Head that is gone
}

// fencedDelete deletes exactly the approval object read (its UID and
// resourceVersion) through the kernel; anything else there is a conflict.
func fencedDelete(ctx context.Context, c Clients, ns string, cm *corev1.ConfigMap, say cas.Progress) error {
	cl := c.CS.CoreV1().ConfigMaps(ns)
	d := cas.Delete{
		What: gate.What(ns), UID: string(cm.UID), ResourceVersion: cm.ResourceVersion, Say: say,
		Send: func(ctx context.Context, opts metav1.DeleteOptions) error { return cl.Delete(ctx, record.Name, opts) },
		Get: func(ctx context.Context) (metav1.Object, error) {
			return cl.Get(ctx, record.Name, metav1.GetOptions{})
		},
	}
	out, err := d.Do(ctx)
	if err != nil {
		return err
	}
	if out == cas.Recreated {
		return fail.Errorf(fail.Conflict, "%s: someone recreated it while we replaced it: run propose again", gate.What(ns))
	}
	return nil
}
