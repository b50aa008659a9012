package gate

import (
	"context"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/ceremony/cas"
)

// VerifyPolicy proves that the API server enforces the approval policy in
// ns: the ValidatingAdmissionPolicy and its binding exist with exactly the
// specs Policy and Binding print, and two forged approvals sent as
// dry-run creates (dryRun=All: nothing is stored) are denied by that
// policy — one naming a proposer other than the caller, one created
// already approved. Anything else refuses, saying how to install it.
func VerifyPolicy(ctx context.Context, cs kubernetes.Interface, ns string) error {
	adm := cs.AdmissionregistrationV1()
	if err := sameSpec(ctx, "ValidatingAdmissionPolicy", adm.ValidatingAdmissionPolicies(),
		func(p *admissionv1.ValidatingAdmissionPolicy) any { return p.Spec }, Policy().Spec); err != nil {
		return err
	}
	if err := sameSpec(ctx, "ValidatingAdmissionPolicyBinding", adm.ValidatingAdmissionPolicyBindings(),
		func(b *admissionv1.ValidatingAdmissionPolicyBinding) any { return b.Spec }, Binding().Spec); err != nil {
		return err
	}
	me, err := WhoAmI(ctx, cs)
	if err != nil {
		return err
	}
	for _, p := range Probes(me) {
		if err := probe(ctx, cs, ns, p); err != nil {
			return err
		}
	}
	return nil
}

// sameSpec reads kind's object named PolicyName exactly and compares its
// spec with want (semantic equality: nil and empty lists are equal).
func sameSpec[T cas.Object](ctx context.Context, kind string, c cas.Client[T], spec func(T) any, want any) error {
	got, present, err := cas.Read(ctx, c, PolicyName, kind+" "+PolicyName)
	switch {
	case err != nil:
		return err
	case !present:
		return refusePolicy("%s %s is absent", kind, PolicyName)
	case !apiequality.Semantic.DeepEqual(spec(got), want):
		return refusePolicy("%s %s differs from the one the tool prints", kind, PolicyName)
	}
	return nil
}

// Probe is one forged approval Check sends as a dry-run create, and the
// policy message its denial must quote.
type Probe struct {
	Name     string
	Approval record.Approval
	Message  string
}

// ProbeUser is the name the forged approvals give to someone who is not
// the caller.
const ProbeUser = "kubectl-ql3:approval-probe"

// Probes are the two forgeries for caller me: proposed in another's name,
// and created already approved.
func Probes(me string) []Probe {
	zero := "sha256:" + strings.Repeat("0", 64)
	base := record.Approval{PreflightDigest: zero, CommandDigest: zero, ExpectedHead: "ql3h1-0-none", Decision: record.Pending}
	other := base
	other.Proposer = ProbeUser
	if me == ProbeUser {
		other.Proposer = ProbeUser + "-2"
	}
	approved := base
	approved.Proposer = me
	approved = approved.Decided(record.Approved, other.Proposer, "")
	return []Probe{
		{Name: "a proposal in another user's name", Approval: other, Message: MsgCreate},
		{Name: "an approval created already approved", Approval: approved, Message: MsgCreate},
	}
}

func probe(ctx context.Context, cs kubernetes.Interface, ns string, p Probe) error {
	_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, ConfigMap(ns, p.Approval), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil {
		return refusePolicy("the API server accepted %s (dry-run)", p.Name)
	}
	if IsDenial(err, p.Message) {
		return nil
	}
	if cas.Unknown(err) || apierrors.IsForbidden(err) && !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
		return cas.Classify(cas.OpCreate, "probe the approval policy with "+p.Name+" (dry-run create; RBAC: create configmaps)", err)
	}
	return refusePolicy("the API server did not deny %s by that policy (dry-run): %v", p.Name, err)
}

// IsDenial reports whether err is the approval policy's denial quoting msg.
func IsDenial(err error, msg string) bool {
	return err != nil && strings.Contains(err.Error(), DenialPrefix+msg)
}
