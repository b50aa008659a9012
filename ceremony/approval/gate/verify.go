package gate

import (
	"context"
	"fmt"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/ceremony/cas"
)

// Enforced is what VerifyPolicy (or ReadPolicies) found: the policies are
// the printed ones, and when they last changed as the API server recorded
// it (docs/approval.md §4, the attestation window).
type Enforced struct {
	// ChangedAt is the latest of the four objects' creationTimestamp and
	// managedFields times: the last write that changed any of them.
	ChangedAt time.Time `json:"changedAt"`
	// ChangedBy names the object ChangedAt is from.
	ChangedBy string `json:"changedBy"`
}

// AttestWindow is how long after the policies' last change a write must
// come for the API server to have enforced them on it: the admission
// plugin picks up a policy change from its informer and recompiles about
// once a second, and the API server records times in whole seconds.
const AttestWindow = 5 * time.Second

// Attested says whether a write the API server recorded at `at` came at
// least AttestWindow after the policies' last change, so that they were
// enforced on it (both times are whole seconds, as the API server keeps
// them).
func (e Enforced) Attested(at time.Time) bool { return !at.Before(e.ChangedAt.Add(AttestWindow)) }

// VerifyPolicy proves that the API server enforces the two policies in
// ns: the ValidatingAdmissionPolicies and bindings exist with exactly the
// specs the tool prints, and forgeries sent as dry-run creates (dryRun=All:
// nothing is stored) are denied by them — two approvals (one naming a
// proposer other than the caller, one created already approved) and a
// Head naming an approval that does not exist. Anything else refuses,
// saying how to install them.
func VerifyPolicy(ctx context.Context, cs kubernetes.Interface, ns string) (Enforced, error) {
	e, err := ReadPolicies(ctx, cs)
	if err != nil {
		return Enforced{}, err
	}
	me, err := WhoAmI(ctx, cs)
	if err != nil {
		return Enforced{}, err
	}
	for _, p := range Probes(me) {
		if err := probe(ctx, cs, ns, p); err != nil {
			return Enforced{}, err
		}
	}
	return e, probeHead(ctx, cs, ns)
}

// ReadPolicies reads the two policies and their bindings exactly and
// compares their specs with the printed ones; it returns when they last
// changed. Read-only (status uses it): it does not prove enforcement.
func ReadPolicies(ctx context.Context, cs kubernetes.Interface) (Enforced, error) {
	adm := cs.AdmissionregistrationV1()
	var e Enforced
	for _, p := range []*admissionv1.ValidatingAdmissionPolicy{Policy(), HeadPolicy()} {
		m, err := sameSpec(ctx, "ValidatingAdmissionPolicy", p.Name, adm.ValidatingAdmissionPolicies(),
			func(g *admissionv1.ValidatingAdmissionPolicy) any { return g.Spec }, p.Spec)
		if err != nil {
			return Enforced{}, err
		}
		if err := e.add("ValidatingAdmissionPolicy "+p.Name, m); err != nil {
			return Enforced{}, err
		}
	}
	for _, b := range []*admissionv1.ValidatingAdmissionPolicyBinding{Binding(), HeadBinding()} {
		m, err := sameSpec(ctx, "ValidatingAdmissionPolicyBinding", b.Name, adm.ValidatingAdmissionPolicyBindings(),
			func(g *admissionv1.ValidatingAdmissionPolicyBinding) any { return g.Spec }, b.Spec)
		if err != nil {
			return Enforced{}, err
		}
		if err := e.add("ValidatingAdmissionPolicyBinding "+b.Name, m); err != nil {
			return Enforced{}, err
		}
	}
	return e, nil
}

// add takes obj's last change into e. An object without managedFields
// (cleared by a write) tells nothing of when it last changed: refused.
func (e *Enforced) add(what string, m metav1.Object) error {
	last, ok := LastWrite(m)
	if !ok {
		return refusePolicy("%s has no managedFields, so when it last changed cannot be told; re-apply it", what)
	}
	if last.After(e.ChangedAt) {
		e.ChangedAt, e.ChangedBy = last, what
	}
	return nil
}

// LastWrite is the latest time the API server recorded a change of m:
// the later of its creationTimestamp and every managedFields entry's time
// (the API server stamps an entry whenever its manager changes the
// object). ok is false when m has no managedFields entry with a time.
func LastWrite(m metav1.Object) (time.Time, bool) {
	last, ok := m.GetCreationTimestamp().Time, false
	for _, f := range m.GetManagedFields() {
		if f.Time == nil {
			continue
		}
		ok = true
		if f.Time.After(last) {
			last = f.Time.Time
		}
	}
	return last.UTC(), ok
}

// sameSpec reads kind's object named name exactly and compares its spec
// with want (semantic equality: nil and empty lists are equal).
func sameSpec[T cas.Object](ctx context.Context, kind, name string, c cas.Client[T], spec func(T) any, want any) (T, error) {
	var zero T
	got, present, err := cas.Read(ctx, c, name, kind+" "+name)
	switch {
	case err != nil:
		return zero, err
	case !present:
		return zero, refusePolicy("%s %s is absent", kind, name)
	case !apiequality.Semantic.DeepEqual(spec(got), want):
		return zero, refusePolicy("%s %s differs from the one the tool prints", kind, name)
	}
	return got, nil
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
	return probeFailed(p.Name, "ValidatingAdmissionPolicy", err)
}

// ProbeHead is the Head probe's forgery: a Head naming an approval whose
// uid is no object's.
func ProbeHead(ns string) *corev1.ConfigMap {
	zero := "sha256:" + strings.Repeat("0", 64)
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: HeadName, Namespace: ns, Labels: map[string]string{HeadApprovalLabel: HeadApprovalLabelValue}},
		Data: map[string]string{HeadKeyPhase: "applying", HeadKeyGeneration: "1", HeadKeyPreflightDigest: zero, HeadKeyCommandDigest: zero,
			HeadKeyApprovalPolicy: HeadRuleOn, HeadKeyApprovalUID: ProbeUser, HeadKeyApprovalProposer: ProbeUser, HeadKeyApprovalApprover: ProbeUser + "-2"},
	}
}

// noParams is how the API server words a denial because the Head
// binding's parameter, the approval object, is absent from the namespace.
const noParams = "no params found for policy binding"

// probeHead sends ProbeHead as a dry-run create: the Head policy must deny
// it — for its claim (MsgHeadParams) when the namespace has an approval
// object, for the missing parameter when it has none. Admission runs
// before the store's existence check, so a present Head changes nothing.
func probeHead(ctx context.Context, cs kubernetes.Interface, ns string) error {
	const name = "a Head naming an approval that does not exist"
	_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, ProbeHead(ns), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err == nil:
		return refusePolicy("the API server accepted %s (dry-run)", name)
	case IsHeadDenial(err, MsgHeadParams), strings.Contains(err.Error(), HeadPolicyName) && strings.Contains(err.Error(), noParams):
		return nil
	}
	return probeFailed(name, HeadPolicyName, err)
}

func probeFailed(name, policyWord string, err error) error {
	if cas.Unknown(err) || apierrors.IsForbidden(err) && !strings.Contains(err.Error(), policyWord) {
		return cas.Classify(cas.OpCreate, "probe the approval policies with "+name+" (dry-run create; RBAC: create configmaps)", err)
	}
	return refusePolicy("the API server did not deny %s by the tool's policy (dry-run): %v", name, err)
}

// IsDenial reports whether err is the approval policy's denial quoting msg.
func IsDenial(err error, msg string) bool {
	return err != nil && strings.Contains(err.Error(), DenialPrefix+msg)
}

// windowRefusal is the gate's refusal of an approval written too soon
// after the policies changed.
func windowRefusal(ns string, created time.Time, e Enforced) error {
	return fmt.Errorf("%s was created at %s, less than %s after the approval policies last changed (%s at %s): the API server may not have enforced them on every write to it, so it does not count; the proposer proposes again (kubectl ql3 propose --preflight FILE --replace) and another person approves",
		What(ns), created.UTC().Format(time.RFC3339), AttestWindow, e.ChangedBy, e.ChangedAt.UTC().Format(time.RFC3339))
}
