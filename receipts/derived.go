package receipts

import (
	"fmt"

	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// The members a receipt copies from its Head that are functions of other
// members of the same receipt (docs/receipts.md §2.4): the offline audit
// recomputes them, and the ceremony computes them with these functions.

// deploymentView is what the deployment digest covers: everything that
// names the deployment, nothing about who is applying it or how far.
type deploymentView struct {
	Generation            int64       `json:"generation"`
	Transition            Transition  `json:"transition"`
	Current               Deployment  `json:"current"`
	Previous              *Deployment `json:"previous"`
	Target                Target      `json:"target"`
	Tool                  Tool        `json:"tool"`
	PreviousReceiptDigest string      `json:"previousReceiptDigest"`
}

// DeploymentDigest is the Head's deploymentDigest (docs/head.md):
// D("deployment", canonical({generation, transition, current, previous,
// target, tool, previousReceiptDigest})).
func DeploymentDigest(generation int64, t Transition, current Deployment, previous *Deployment, target Target, tool Tool, previousReceiptDigest string) (string, error) {
	return canon.DigestOf(canon.DomainDeployment, deploymentView{
		Generation: generation, Transition: t, Current: current, Previous: previous,
		Target: target, Tool: tool, PreviousReceiptDigest: previousReceiptDigest,
	})
}

// IdentityStepDigest is the transcript digest of the identity step (and of
// the final identity step): D("transcript", canonical({"step": "identity",
// "record": {"clusterIdentity": clusterIdentity}})).
func IdentityStepDigest(clusterIdentity string) (string, error) {
	return canon.DigestOf(canon.DomainTranscript, map[string]any{
		"step": "identity", "record": map[string]string{"clusterIdentity": clusterIdentity},
	})
}

// checkDerived recomputes head.deploymentDigest, steps.identity and
// steps.finalIdentity from the receipt's other members.
func (r *Receipt) checkDerived() error {
	d, err := DeploymentDigest(r.Generation, r.Transition, r.Deployment, r.PreviousDeployment, r.Target, r.Tool, r.PreviousReceiptDigest)
	if err != nil {
		return err
	}
	if d != r.Head.DeploymentDigest {
		return fmt.Errorf("head.deploymentDigest %q is not the deployment digest of this receipt's members (%q): docs/receipts.md §2.4", r.Head.DeploymentDigest, d)
	}
	id, err := IdentityStepDigest(r.Target.ClusterIdentity)
	if err != nil {
		return err
	}
	if r.Steps.Identity != id || r.Steps.FinalIdentity != id {
		return fmt.Errorf("steps.identity %q and steps.finalIdentity %q must both be the identity transcript of target.clusterIdentity (%q): docs/receipts.md §2.4", r.Steps.Identity, r.Steps.FinalIdentity, id)
	}
	return nil
}
