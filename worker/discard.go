package worker

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/cas"
	"github.com/qinglong/kubectl-ql3/formats/delivery"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// DiscardResult is a completed discard-stage.
type DiscardResult struct {
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	DeliveryID string `json:"deliveryId"`
	// Reason is "published" (the PodTemplate carries the delivery),
	// "superseded" (it carries a later generation) or "abandoned".
	Reason  string            `json:"reason,omitempty"`
	Outcome cas.DeleteOutcome `json:"outcome"`
}

// Discard deletes d's stage Secret once its delivery is published (the
// PodTemplate carries it), superseded (the PodTemplate carries a
// generation at or above the stage's) or, with abandon, abandoned — never
// while the credential Secret holds the stage's token and the PodTemplate
// does not carry it (a half-published delivery whose rerun needs the
// stage): conflict. The delete carries the UID and resourceVersion of the
// stage read (cas.Delete): it removes exactly that stage, or nothing.
func Discard(ctx context.Context, o Options, deliveryID string, abandon bool) (*DiscardResult, error) {
	if err := delivery.CheckID("--delivery-id", deliveryID); err != nil {
		return nil, err
	}
	ns, name := o.stageNS(), delivery.StageName(deliveryID)
	what := "stage Secret " + ns + "/" + name
	res := &DiscardResult{Namespace: ns, Name: name, DeliveryID: deliveryID}
	st, present, err := cas.Read(ctx, o.Stages, name, what)
	if err != nil {
		return nil, err
	}
	if !present {
		res.Outcome = cas.AlreadyAbsent
		return res, nil
	}
	if st.Labels[LabelManagedBy] != ManagedBy || st.Labels[LabelStage] != "true" || st.Annotations[delivery.AnnotationDeliveryID] != deliveryID {
		return nil, fail.Errorf(fail.Invalid, "%s is not a kubectl-ql3 stage of delivery %q: left alone", what, deliveryID)
	}
	gen, err := delivery.ParseGeneration(st.Annotations[delivery.AnnotationGeneration])
	if err != nil {
		return nil, fail.Errorf(fail.Tamper, "%s: annotation %s: %v", what, delivery.AnnotationGeneration, err)
	}
	// The Deployment named by the stage's delivery is not recorded on the
	// stage; the caller's Options name the namespace, and the PodTemplate
	// is found through DeploymentName.
	dep, present, err := cas.Read(ctx, o.Deployments, o.DeploymentName, o.deploymentWhat(o.DeploymentName))
	if err != nil {
		return nil, err
	}
	ann := map[string]string{}
	if present {
		ann = dep.Spec.Template.Annotations
	}
	cur, _ := delivery.ParseGeneration(ann[delivery.AnnotationGeneration])
	switch {
	case ann[delivery.AnnotationDeliveryID] == deliveryID:
		res.Reason = "published"
	case cur >= gen:
		res.Reason = "superseded"
	case abandon:
		sec, spresent, err := cas.Read(ctx, o.Secrets, delivery.SecretName, o.secretWhat())
		if err != nil {
			return nil, err
		}
		if spresent && holdsToken(sec, st.Data[delivery.SecretKey]) {
			return nil, fail.Errorf(fail.Conflict, "%s holds delivery %q's token but the Deployment does not carry it: the delivery is half-published; finish it with kubectl ql3 worker publish (which needs this stage); nothing was deleted", o.secretWhat(), deliveryID)
		}
		res.Reason = "abandoned"
	default:
		return nil, fail.Errorf(fail.Conflict, "delivery %q is neither published nor superseded (the PodTemplate carries generation %d, the stage %d): publish it, or pass --abandon to discard it; nothing was deleted", deliveryID, cur, gen)
	}
	if err := cas.Require(ctx, o.Review, []cas.Access{{Verb: "delete", Resource: "secrets", Namespace: ns, Name: name}}, o.Hint); err != nil {
		return nil, err
	}
	del := cas.Delete{
		What: what, UID: string(st.UID), ResourceVersion: st.ResourceVersion, Say: o.Say,
		Send: func(ctx context.Context, opts metav1.DeleteOptions) error { return o.Stages.Delete(ctx, name, opts) },
		Get: func(ctx context.Context) (metav1.Object, error) {
			return o.Stages.Get(ctx, name, metav1.GetOptions{})
		},
	}
	if res.Outcome, err = del.Do(ctx); err != nil {
		return nil, err
	}
	o.say("%s: %s (%s)", what, res.Outcome, res.Reason)
	return res, nil
}
