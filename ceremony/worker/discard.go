package worker

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// DiscardResult is a completed discard-stage.
type DiscardResult struct {
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	DeliveryID string `json:"deliveryId"`
	// Deployment is the Worker Deployment judged: the one the stage
	// records (or, for a stage that records none, DeploymentName).
	Deployment string `json:"deployment,omitempty"`
	// Reason is "published" (the PodTemplate carries the delivery),
	// "superseded" (it carries a later generation) or "abandoned".
	Reason  string            `json:"reason,omitempty"`
	Outcome cas.DeleteOutcome `json:"outcome"`
}

// Discard deletes d's stage Secret once its delivery is published (the
// PodTemplate of the Deployment the stage records carries it), superseded
// (that PodTemplate carries a generation at or above the stage's) or, with
// abandon, abandoned — never while the credential Secret holds the stage's
// token and the PodTemplate does not carry it (a half-published delivery,
// superseded or not, whose token only the stage still accounts for):
// conflict. The Deployment is the one recorded on the stage; a
// DeploymentName or Namespace that disagrees is invalid, and a Deployment
// of that name with another UID is not the stage's (it was deleted). The
// delete carries the UID and resourceVersion of the stage read
// (cas.Delete): it removes exactly that stage, or nothing.
func Discard(ctx context.Context, o Options, deliveryID string, abandon bool) (*DiscardResult, error) {
	if err := delivery.CheckID("--delivery-id", deliveryID); err != nil {
		return nil, err
	}
	if err := CheckStageNamespace(o.Namespace, o.StageNamespace); err != nil {
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
	dep, err := o.stageDeployment(ctx, what, st)
	if err != nil {
		return nil, err
	}
	res.Deployment = o.Namespace + "/" + o.DeploymentName
	if res.Reason, err = o.discardReason(ctx, st, dep, gen, abandon); err != nil {
		return nil, err
	}
	if err := access.Require(ctx, o.Review, []access.Access{{Verb: "delete", Resource: "secrets", Namespace: ns, Name: name}}, o.Hint); err != nil {
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
	o.Say.Printf("%s: %s (%s)", what, res.Outcome, res.Reason)
	return res, nil
}

// stageDeployment reads the Worker Deployment stage st records, setting
// o.DeploymentName to it: a DeploymentName or Namespace given that
// disagrees is invalid; a stage that records none (staged by an older
// kubectl-ql3) needs DeploymentName. It returns nil when the Deployment is
// absent or has another UID than the recorded one (not the stage's).
func (o *Options) stageDeployment(ctx context.Context, what string, st *corev1.Secret) (*appsv1.Deployment, error) {
	ns, name, uid, ok, err := recordedDeployment(what, st)
	switch {
	case err != nil:
		return nil, err
	case !ok && o.DeploymentName == "":
		return nil, fail.Errorf(fail.Invalid, "%s records no Deployment (staged by an older kubectl-ql3): pass --deployment NAME, the Worker Deployment it was staged for; nothing was deleted", what)
	case !ok:
		o.Say.Printf("%s records no Deployment (staged by an older kubectl-ql3): judging it against %s, as --deployment says", what, o.deploymentWhat(o.DeploymentName))
	case ns != o.Namespace || o.DeploymentName != "" && o.DeploymentName != name:
		return nil, fail.Errorf(fail.Invalid, "%s was staged for Deployment %s/%s, not %s: pass -n %s (and --deployment %s, or none); nothing was deleted", what, ns, name, o.deploymentWhat(o.DeploymentName), ns, name)
	default:
		o.DeploymentName = name
	}
	dep, present, err := cas.Read(ctx, o.Deployments, o.DeploymentName, o.deploymentWhat(o.DeploymentName))
	if err != nil || !present {
		return nil, err
	}
	if ok && string(dep.UID) != uid {
		o.Say.Printf("%s has UID %s, not the recorded %s: the stage's Deployment was deleted", o.deploymentWhat(o.DeploymentName), dep.UID, uid)
		return nil, nil
	}
	return dep, nil
}

// published checks that the delivery of stage st whose id the PodTemplate
// annotations ann name is published as publish leaves it, not merely
// named: the PodTemplate carries the stage's credential id and generation
// too, and the credential Secret holds the stage's token. (The keyed token
// digest and the publication digest need the token-digest key and the
// delivery document, which discard does not take.) A PodTemplate that
// names the delivery without the rest (an annotation edited by hand, or a
// publish that crashed after the Secret write) keeps the stage: it may be
// all that finishes the delivery.
func (o *Options) published(ctx context.Context, st *corev1.Secret, ann map[string]string) error {
	id := st.Annotations[delivery.AnnotationDeliveryID]
	for _, k := range []string{delivery.AnnotationCredentialID, delivery.AnnotationGeneration} {
		if ann[k] != st.Annotations[k] {
			return fail.Errorf(fail.Conflict, "the PodTemplate names delivery %q, but its %s is %q, the stage's %q: it is not published as publish leaves it; finish it with kubectl ql3 worker publish (which needs this stage); nothing was deleted", id, k, ann[k], st.Annotations[k])
		}
	}
	sec, present, err := cas.Read(ctx, o.Secrets, delivery.SecretName, o.secretWhat())
	if err != nil {
		return err
	}
	if !present || !holdsToken(sec, st.Data[delivery.SecretKey]) {
		return fail.Errorf(fail.Conflict, "the PodTemplate names delivery %q, but %s does not hold its token: it is not published as publish leaves it; nothing was deleted", id, o.secretWhat())
	}
	return nil
}

// discardReason judges whether the stage st of generation gen may go: its
// delivery is published on dep, superseded there, or (abandon) abandoned;
// except when published, the credential Secret must not hold the stage's
// token (a half-publication: conflict).
func (o *Options) discardReason(ctx context.Context, st *corev1.Secret, dep *appsv1.Deployment, gen int64, abandon bool) (string, error) {
	id := st.Annotations[delivery.AnnotationDeliveryID]
	ann := map[string]string{}
	if dep != nil {
		ann = dep.Spec.Template.Annotations
	}
	cur, _ := delivery.ParseGeneration(ann[delivery.AnnotationGeneration])
	reason := "abandoned"
	switch {
	case ann[delivery.AnnotationDeliveryID] == id:
		return "published", o.published(ctx, st, ann)
	case cur >= gen:
		reason = "superseded"
	case !abandon:
		return "", fail.Errorf(fail.Conflict, "delivery %q is neither published nor superseded (the PodTemplate carries generation %d, the stage %d): publish it, or pass --abandon to discard it; nothing was deleted", id, cur, gen)
	}
	sec, present, err := cas.Read(ctx, o.Secrets, delivery.SecretName, o.secretWhat())
	if err != nil {
		return "", err
	}
	if present && holdsToken(sec, st.Data[delivery.SecretKey]) {
		return "", fail.Errorf(fail.Conflict, "%s holds delivery %q's token but the Deployment does not carry it (it carries generation %d): the delivery is half-published, and only this stage still accounts for that token; finish it with kubectl ql3 worker publish (which needs this stage) or, once it is %s, restore the Secret to the published credential; nothing was deleted", o.secretWhat(), id, cur, reason)
	}
	return reason, nil
}
