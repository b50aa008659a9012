package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/gate"
	apprec "github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
)

// The two checks that believe only what the API server attested
// (docs/approval.md §2.2, §4 step 4), in the gate row.

// forgeHead writes the Head raw as alice (client-go, the tool's Head field
// manager) from the admin's generation 1: the rule turned on with no
// approval named, and a made-up approval in bob's name. The Head policy
// must deny both; the Head keeps its resourceVersion.
func (c *campaign) forgeHead(p *twoPerson, t *approvalGateTally) error {
	cs, err := c.clientsetOf(p.aliceKC)
	if err != nil {
		return err
	}
	ctx := context.Background()
	cm, err := c.admin.CoreV1().ConfigMaps(p.ns).Get(ctx, deploy.HeadName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	h1, err := deploy.ParseHeadConfigMap(cm)
	if err != nil {
		return err
	}
	ruleOn := nextRaw(h1)
	ruleOn.ApprovalPolicy = deploy.ApprovalTwoPerson
	madeUp := nextRaw(h1)
	madeUp.ApprovalPolicy = deploy.ApprovalTwoPerson
	madeUp.Approval = &deploy.HeadApproval{Proposer: p.alice, Approver: p.bob, UID: "00000000-0000-4000-8000-00000000f04e", ResourceVersion: "1"}
	for _, f := range []struct {
		h    *deploy.Head
		want string
	}{{ruleOn, gate.MsgHeadClaim}, {madeUp, gate.MsgHeadParams}} {
		if err := f.h.Seal(); err != nil {
			return err
		}
		raw, err := f.h.ConfigMap(p.ns)
		if err != nil {
			return err
		}
		raw.ResourceVersion = cm.ResourceVersion
		_, err = cs.CoreV1().ConfigMaps(p.ns).Update(ctx, raw, metav1.UpdateOptions{FieldManager: deploy.HeadFieldManager})
		if !gate.IsHeadDenial(err, f.want) {
			return fmt.Errorf("raw Head write by %s: %v, want the Head policy's denial %q", p.alice, err, f.want)
		}
		p.headDenied++
		t.forgeries++
	}
	return c.headUntouched(p)
}

// nextRaw is h's next generation as a raw write makes it (deploytest.Next
// without a testing.T): an upgrade with h's deployment as previous.
func nextRaw(h *deploy.Head) *deploy.Head {
	next := *h
	prev := h.Current.Deployment
	r, _ := deploy.ReceiptFromHead(h)
	next.Generation, next.Previous = h.Generation+1, &prev
	if r != nil {
		next.PreviousReceiptDigest = r.SelfDigest
	}
	next.Transition.Kind, next.Transition.MutationID = deploy.TransitionUpgrade, "abababababababababababababababab"
	next.Current.Version = "3.0.9"
	return &next
}

// gapApproval: with the approval policy's binding deleted, alice creates
// the approval of her record already approved in bob's name (polling
// until the API server lets her); the binding is restored as printed and
// its window waited out. apply must refuse it (exit 2, naming the window),
// the Head untouched; alice then deletes it.
func (c *campaign) gapApproval(p *twoPerson, t *approvalGateTally) error {
	cs, err := c.clientsetOf(p.aliceKC)
	if err != nil {
		return err
	}
	a := apprec.Approval{PreflightDigest: p.rec.SelfDigest, CommandDigest: p.rec.CommandDigest, ExpectedHead: p.expect, Proposer: p.alice, Decision: apprec.Pending}
	forged := gate.ConfigMap(p.ns, a.Decided(apprec.Approved, p.bob, ""))
	cms := cs.CoreV1().ConfigMaps(p.ns)
	err = c.withoutBinding(func() error {
		var last error
		err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, last = cms.Create(ctx, forged, metav1.CreateOptions{})
			return last == nil, nil
		})
		return errors.Join(err, last)
	})
	if err != nil {
		return fmt.Errorf("the approval forged while the binding was deleted: %w", err)
	}
	if err := c.refusedApply(p, t, "an approval forged while the policy was off", "after the approval policies last changed"); err != nil {
		return err
	}
	return cms.Delete(context.Background(), apprec.Name, metav1.DeleteOptions{})
}

func (c *campaign) clientsetOf(kc string) (kubernetes.Interface, error) {
	cfg, err := c.restConfig(kc)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}
