// Package gate is what the deployment approval's gate needs at apply time,
// and what propose, approve and reject share: the approval object's exact
// read, the caller's identity as the API server authenticated it, the
// admission policy the tool prints, and Check — the one function apply
// calls to learn whether a preflight is approved by a second person, the
// API server enforcing the policy (docs/approval.md). It imports no other
// ceremony, so ceremony/deploy can import it.
package gate

import (
	"context"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/qinglong/kubectl-ql3/ceremony/approval/record"
	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// What names the approval object of ns in messages.
func What(ns string) string { return "approval " + ns + "/" + record.Name }

// Parse validates an approval ConfigMap (record.Parse: tamper on any
// deviation).
func Parse(cm *corev1.ConfigMap) (record.Approval, error) {
	return record.Parse(record.Object{
		Name: cm.Name, Labels: cm.Labels, Data: cm.Data, BinaryDataKeys: len(cm.BinaryData),
		Immutable: cm.Immutable != nil && *cm.Immutable, Deleting: cm.DeletionTimestamp != nil,
		OwnerReferences: len(cm.OwnerReferences), Finalizers: len(cm.Finalizers),
	})
}

// ConfigMap is the approval object of ns holding a.
func ConfigMap(ns string, a record.Approval) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: record.Name, Namespace: ns, Labels: record.Labels()},
		Data:       a.Data(),
	}
}

// Read is the exact read of ns's approval object, validated: (cm, a, true)
// when present, (nil, zero, false) when the API server answered 404.
func Read(ctx context.Context, cs kubernetes.Interface, ns string) (*corev1.ConfigMap, record.Approval, bool, error) {
	cm, present, err := cas.Read(ctx, cs.CoreV1().ConfigMaps(ns), record.Name, What(ns))
	if err != nil || !present {
		return nil, record.Approval{}, false, err
	}
	a, err := Parse(cm)
	return cm, a, true, err
}

// WhoAmI is the caller's username as the API server authenticated it
// (SelfSubjectReview, authentication.k8s.io/v1); with --as, the
// impersonated user's.
func WhoAmI(ctx context.Context, cs kubernetes.Interface) (string, error) {
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", cas.Classify(cas.OpCreate, "who am I (SelfSubjectReview; RBAC: create selfsubjectreviews.authentication.k8s.io)", err)
	}
	if r.Status.UserInfo.Username == "" {
		return "", fail.Errorf(fail.Other, "who am I: the API server's SelfSubjectReview named no username")
	}
	return r.Status.UserInfo.Username, nil
}

// Approved is what Check found: the approval as the API server holds it.
type Approved struct {
	Namespace       string `json:"namespace"`
	Proposer        string `json:"proposer"`
	Approver        string `json:"approver"`
	Reason          string `json:"reason"`
	UID             string `json:"uid"`
	ResourceVersion string `json:"resourceVersion"`
}

// Check is the apply gate: the approval object of ns exists, is well
// formed, approved, for exactly this preflight digest, command digest and
// expected-Head token, by an approver other than its proposer — and the
// API server enforces the policies that make those names true
// (VerifyPolicy), and has since before the object was created: it was
// created at least AttestWindow after the policies last changed, so every
// write to it (its create and its decision) was checked by them.
// Any failure refuses: tamper (5) for a malformed object, invalid (2) for
// a missing, pending, rejected or mismatched approval, for a policy
// that is missing, altered or not enforcing, and for an approval created
// within the window after the policies changed.
func Check(ctx context.Context, cs kubernetes.Interface, ns, preflightDigest, commandDigest, expectedHead string) (Approved, error) {
	cm, a, present, err := Read(ctx, cs, ns)
	if err != nil {
		return Approved{}, err
	}
	refuse := func(format string, args ...any) (Approved, error) {
		return Approved{}, fail.Errorf(fail.Invalid, "%s: "+format, append([]any{What(ns)}, args...)...)
	}
	switch {
	case !present:
		return refuse("absent: this preflight needs a second person's approval (kubectl ql3 propose --preflight FILE, then another person runs kubectl ql3 approve --preflight FILE)")
	case a.PreflightDigest != preflightDigest || a.CommandDigest != commandDigest:
		return refuse("is for preflight %s (command %s), not this preflight %s (command %s): propose this one", a.PreflightDigest, a.CommandDigest, preflightDigest, commandDigest)
	case a.ExpectedHead != expectedHead:
		return refuse("was proposed against Head %s, this preflight expects %s", a.ExpectedHead, expectedHead)
	case a.Decision == record.Pending:
		return refuse("proposed by %s and still pending: another person runs kubectl ql3 approve --preflight FILE", a.Proposer)
	case a.Decision == record.Rejected:
		return refuse("rejected by %s (%q)", a.Approver, a.Reason)
	case a.Decision != record.Approved || a.Approver == a.Proposer:
		return refuse("not approved by a second person") // Parse refuses these already
	}
	enforced, err := VerifyPolicy(ctx, cs, ns)
	if err != nil {
		return Approved{}, err
	}
	if !enforced.Attested(cm.CreationTimestamp.Time) {
		return Approved{}, fail.Errorf(fail.Invalid, "%v", windowRefusal(ns, cm.CreationTimestamp.Time, enforced))
	}
	return Approved{Namespace: ns, Proposer: a.Proposer, Approver: a.Approver, Reason: a.Reason,
		UID: string(cm.UID), ResourceVersion: cm.ResourceVersion}, nil
}

func refusePolicy(format string, args ...any) error {
	return fail.Errorf(fail.Invalid, "the approval policy is not enforced: "+format+"; "+InstallHint, args...)
}
