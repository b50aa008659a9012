package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
	apprec "github.com/qinglong/kubectl-ql3/ceremony/approval/record"
)

// --- the gate's refusals and forgeries ---------------------------------------------

type approvalGateTally struct {
	refused, forgeries, selfApprovals, commits int
}

// The apply refusals of one run, in the order they happen.
const approvalRefusalsPerRun = 7

// The raw forgeries of one run: four of the approval object, two of the Head.
const approvalForgeriesPerRun = 6

// approvalRefusals: an upgrade under the rule (a Head to protect): apply
// with no proposal, a pending one, after a self-approval attempt, after
// forgeries the API server denied, after a rejection, and with the
// approval of another record; each exits 2 with the Head untouched and no
// Head write by the applier. Then the approved record applies.
func (c *campaign) approvalRefusals(cs *caseState) Row {
	runs := c.runs(3, 1)
	row, t0 := openRow("approval: apply's gate refusals and forgeries (an upgrade under the rule)", runs,
		"apply exits 2 with no proposal, pending, after a self-approval attempt (approve by the proposer: exit 2), after 6 raw forgeries by the proposer (4 of the approval object, 2 of the Head: the rule on with no approval, a made-up approval — each denied by the API server), with an approval she created already approved while the approval policy's binding was deleted (restored before the apply), after a reject, and with another record's approval; the Head's resourceVersion unchanged and no successful Head write by the applier; the approved record then commits")
	var t approvalGateTally
	approvalRuns(cs, runs, func(int) error { return c.approvalRefusalRun(&t) })
	row.Observed = fmt.Sprintf("%d/%d applies refused (exit 2) with the Head untouched and no Head write (the only Head writes by the proposer are her raw ones, each denied); %d/%d forgeries denied by the API server; %d/%d self-approvals refused (exit 2); %d/%d approved records committed",
		t.refused, approvalRefusalsPerRun*runs, t.forgeries, approvalForgeriesPerRun*runs, t.selfApprovals, runs, t.commits, runs)
	row.Pass = t.refused == approvalRefusalsPerRun*runs && t.forgeries == approvalForgeriesPerRun*runs && t.selfApprovals == runs && t.commits == runs && len(cs.failures()) == 0
	return closeRow(cs, row, t0)
}

func (c *campaign) approvalRefusalRun(t *approvalGateTally) error {
	p, err := c.newTwoPerson("apprgate", true)
	if err != nil {
		return err
	}
	// A second record for the same Head (3.1.0 relabelled 3.1.1).
	dir2, err := c.release("v3.1.0", p.ns, "3.1.1")
	if err != nil {
		return err
	}
	other := *p
	if other.pf, other.rec, err = c.preflightAs(p, dir2); err != nil {
		return err
	}
	steps := []func() error{
		func() error { return c.refusedApply(p, t, "no proposal", "absent: this preflight needs") },
		func() error { return c.ok(p.aliceKC, "propose", "--preflight", p.pf) },
		func() error { return c.refusedApply(p, t, "pending", "still pending") },
		func() error { return c.selfApproval(p, t) },
		func() error { return c.refusedApply(p, t, "after a self-approval attempt", "still pending") },
		func() error { return c.forgeHead(p, t) },
		func() error { return c.forge(p, t) },
		func() error { return c.refusedApply(p, t, "after the forgeries", "absent: ") },
		func() error { return c.gapApproval(p, t) },
		func() error { return c.ok(p.aliceKC, "propose", "--preflight", p.pf) },
		func() error { return c.ok(p.bobKC, "reject", "--preflight", p.pf, "--reason", "not this week") },
		func() error { return c.refusedApply(p, t, "rejected", "rejected by "+p.bob) },
		func() error { return c.ok(p.aliceKC, "propose", "--preflight", other.pf) },
		func() error { return c.ok(p.bobKC, "approve", "--preflight", other.pf) },
		func() error {
			return c.refusedApply(p, t, "another record's approval", "is for preflight "+other.rec.SelfDigest)
		},
		func() error { return c.ok(p.aliceKC, "apply", "--preflight", other.pf, "--receipts-dir", other.rdir) },
		func() error { return c.committedWith(&other, p.bob) },
	}
	for i, s := range steps {
		if err := s(); err != nil {
			return fmt.Errorf("step %d: %w", i+1, err)
		}
	}
	t.commits++
	return nil
}

// ok runs the binary as kc and wants exit 0.
func (c *campaign) ok(kc string, args ...string) error {
	if r := c.runBinary(kc, nil, args...); r.code != 0 {
		return fmt.Errorf("%s: exit %d: %s", strings.Join(args[:1], " "), r.code, r.stderr)
	}
	return nil
}

// refusedApply: alice's apply of p's record exits 2 saying want, the Head
// untouched, no Head write by alice.
func (c *campaign) refusedApply(p *twoPerson, t *approvalGateTally, class, want string) error {
	r := c.apply(p, p.aliceKC)
	if r.code != 2 || !strings.Contains(r.stderr, want) {
		return fmt.Errorf("apply, %s: exit %d, want 2 saying %q: %s", class, r.code, want, r.stderr)
	}
	if err := c.headUntouched(p); err != nil {
		return fmt.Errorf("apply, %s: %v", class, err)
	}
	t.refused++
	return nil
}

func (c *campaign) selfApproval(p *twoPerson, t *approvalGateTally) error {
	r := c.decide(p, p.aliceKC, "approve")
	if r.code != 2 || !strings.Contains(r.stderr, "you ("+p.alice+") proposed this preflight") {
		return fmt.Errorf("approve by the proposer: exit %d, want 2: %s", r.code, r.stderr)
	}
	t.selfApprovals++
	return nil
}

// forge writes approvals by hand as alice with raw client writes: her
// pending proposal updated to approved (in bob's name, then in hers),
// then (after deleting it, which the proposer may) created approved in
// bob's name, and created pending naming bob as proposer. The API server
// must deny all four with the policy's message; the object ends absent.
func (c *campaign) forge(p *twoPerson, t *approvalGateTally) error {
	cfg, err := c.restConfig(p.aliceKC)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps(p.ns)
	cur, err := cms.Get(ctx, apprec.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	a, err := gate.Parse(cur)
	if err != nil {
		return err
	}
	for _, approver := range []string{p.bob, p.alice} {
		f := cur.DeepCopy()
		f.Data = a.Decided(apprec.Approved, approver, "").Data()
		if _, err := cms.Update(ctx, f, metav1.UpdateOptions{}); !gate.IsDenial(err, gate.MsgUpdate) {
			return fmt.Errorf("forged update approved by %s: %v, want the policy's denial", approver, err)
		}
		t.forgeries++
	}
	if err := cms.Delete(ctx, apprec.Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	otherProposer := a
	otherProposer.Proposer = p.bob
	for _, f := range []apprec.Approval{a.Decided(apprec.Approved, p.bob, ""), otherProposer} {
		if _, err := cms.Create(ctx, gate.ConfigMap(p.ns, f), metav1.CreateOptions{}); !gate.IsDenial(err, gate.MsgCreate) {
			return fmt.Errorf("forged create %+v: %v, want the policy's denial", f, err)
		}
		t.forgeries++
	}
	if cm, err := c.approvalObject(p.ns); err != nil || cm != nil {
		return fmt.Errorf("after the forgeries the object is %v (%v), want absent", cm, err)
	}
	return nil
}

// --- tamper ----------------------------------------------------------------------

// A malformed approval object, one class at a time. The policy denies
// most of them, so the admin writes those with the policy's binding
// removed for a moment; a bad digest the policy does not check, so the
// proposer creates that one under the policy, with a raw client.
type approvalTamperClass struct {
	name       string
	asProposer bool
	edit       func(cm *corev1.ConfigMap)
}

var approvalTamperClasses = []approvalTamperClass{
	{"extra data key", false, func(cm *corev1.ConfigMap) { cm.Data["note"] = "x" }},
	{"bad digest (created pending by the proposer, under the policy)", true, func(cm *corev1.ConfigMap) {
		cm.Data[apprec.KeyPreflightDigest] = "sha256:" + strings.Repeat("g", 64)
	}},
	{"schema label removed", false, func(cm *corev1.ConfigMap) { delete(cm.Labels, apprec.LabelSchema) }},
	{"binaryData", false, func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"run": []byte("echo")} }},
	{"finalizer", false, func(cm *corev1.ConfigMap) { cm.Finalizers = []string{"example.com/hold"} }},
	{"approved by its own proposer", false, func(cm *corev1.ConfigMap) { cm.Data[apprec.KeyApprover] = cm.Data[apprec.KeyProposer] }},
}

// approvalTamper: for every class, a namespace whose record is proposed
// and approved, then its object made malformed: approval status, approve
// and apply exit 5, the object keeps its resourceVersion, the Head is not
// written.
func (c *campaign) approvalTamper(cs *caseState) Row {
	classes := approvalTamperClasses
	row, t0 := openRow("approval: tampered approval objects", len(classes),
		"approval status, approve and apply exit 5 for every class; the object keeps its resourceVersion; no Head write")
	ps := make([]*twoPerson, len(classes))
	errs := make([]error, len(classes))
	c.parallel(len(classes), func(i int) { ps[i], errs[i] = c.tamperedApproval(classes[i]) })
	err := c.withoutBinding(func() error {
		var all []error
		for i, tc := range classes {
			if errs[i] == nil && !tc.asProposer {
				errs[i] = c.tamperUpdate(ps[i].ns, tc.edit)
			}
			all = append(all, errs[i])
		}
		return errors.Join(all...)
	})
	if err != nil {
		cs.failf("tamper: %v", err)
	}
	ok := 0
	for i, tc := range classes {
		if errs[i] == nil {
			errs[i] = c.tamperRefused(ps[i])
		}
		if errs[i] != nil {
			cs.failf("%s: %v [replay: -seed %d -case approval]", tc.name, errs[i], cs.seed)
			continue
		}
		ok++
	}
	row.Observed = fmt.Sprintf("%d of %d tamper classes failed closed (status, approve, apply: exit 5) with the object and the Head untouched", ok, len(classes))
	row.Pass = ok == len(classes) && len(cs.failures()) == 0
	return closeRow(cs, row, t0)
}

// tamperedApproval sets up one class: alice proposes, bob approves (the
// admin edits it later); for a proposer's class, alice instead creates the
// edited object pending with a raw client, under the policy.
func (c *campaign) tamperedApproval(tc approvalTamperClass) (*twoPerson, error) {
	p, err := c.newTwoPerson("apprtamper", false)
	if err != nil {
		return nil, err
	}
	if tc.asProposer {
		a := apprec.Approval{PreflightDigest: p.rec.SelfDigest, CommandDigest: p.rec.CommandDigest, ExpectedHead: p.expect, Proposer: p.alice, Decision: apprec.Pending}
		cm := gate.ConfigMap(p.ns, a)
		tc.edit(cm)
		cfg, err := c.restConfig(p.aliceKC)
		if err != nil {
			return p, err
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return p, err
		}
		_, err = cs.CoreV1().ConfigMaps(p.ns).Create(context.Background(), cm, metav1.CreateOptions{})
		return p, err
	}
	if err := c.ok(p.aliceKC, "propose", "--preflight", p.pf); err != nil {
		return p, err
	}
	return p, c.ok(p.bobKC, "approve", "--preflight", p.pf)
}

// withoutBinding deletes the policy's binding as the admin, runs fn, and
// creates the binding again as printed, waiting until it is enforced.
// Nothing else of the campaign runs meanwhile (cases run one at a time).
func (c *campaign) withoutBinding(fn func() error) error {
	b := c.admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	if err := b.Delete(context.Background(), gate.PolicyName, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete the binding: %w", err)
	}
	ferr := fn()
	if _, err := b.Create(context.Background(), gate.Binding(), metav1.CreateOptions{}); err != nil {
		return errors.Join(ferr, fmt.Errorf("restore the binding: %w", err))
	}
	return errors.Join(ferr, c.waitEnforced())
}

// tamperUpdate edits ns's approval object as the admin, polling (30s
// deadline) while the API server still denies it: it drops a deleted
// binding a moment after the delete.
func (c *campaign) tamperUpdate(ns string, edit func(*corev1.ConfigMap)) error {
	cms := c.admin.CoreV1().ConfigMaps(ns)
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		cm, err := cms.Get(ctx, apprec.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		edit(cm)
		_, last = cms.Update(ctx, cm, metav1.UpdateOptions{})
		if last != nil && !gate.IsDenial(last, "") {
			return false, last
		}
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("edit %s's approval: %v (last: %v)", ns, err, last)
	}
	return nil
}

// tamperRefused: status, approve and apply exit 5, the object keeps its
// resourceVersion, the Head is not written.
func (c *campaign) tamperRefused(p *twoPerson) error {
	before, err := c.approvalObject(p.ns)
	if err != nil || before == nil {
		return fmt.Errorf("the tampered object: %v (%v)", before, err)
	}
	_, st := c.approvalStatus(p.ns)
	ap := c.decide(p, p.bobKC, "approve")
	apl := c.apply(p, p.aliceKC)
	after, err := c.approvalObject(p.ns)
	if err != nil || after == nil {
		return fmt.Errorf("the tampered object afterwards: %v (%v)", after, err)
	}
	if st.code != 5 || ap.code != 5 || apl.code != 5 || after.ResourceVersion != before.ResourceVersion {
		return fmt.Errorf("status exit %d, approve exit %d, apply exit %d (want 5 each); object resourceVersion %s -> %s: %s",
			st.code, ap.code, apl.code, before.ResourceVersion, after.ResourceVersion, apl.stderr)
	}
	return c.headUntouched(p)
}
