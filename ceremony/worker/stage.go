package worker

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/strictjson"
)

// StageResult is a completed stage: names and versions, never the token.
type StageResult struct {
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	DeliveryID string `json:"deliveryId"`
	// Action is "created" or "replayed" (the stage already held exactly
	// this delivery and token; nothing was written).
	Action          string `json:"action"`
	UID             string `json:"uid"`
	ResourceVersion string `json:"resourceVersion"`
	Settled         bool   `json:"settled,omitempty"`
}

// StageSecret is the immutable stage Secret of d holding tok, recording
// the Worker Deployment dep it is staged for (namespace/name and UID).
func StageSecret(ns string, d *delivery.Delivery, tok []byte, dep *appsv1.Deployment) (*corev1.Secret, error) {
	dd, err := delivery.DeliveryDigest(d)
	if err != nil {
		return nil, err
	}
	yes := true
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: delivery.StageName(d.DeliveryID), Namespace: ns,
			Labels: map[string]string{LabelManagedBy: ManagedBy, LabelStage: "true"},
			Annotations: map[string]string{
				AnnotationDeliveryDigest:        dd,
				delivery.AnnotationDeliveryID:   d.DeliveryID,
				delivery.AnnotationCredentialID: d.CredentialID,
				delivery.AnnotationGeneration:   delivery.GenerationString(d.Generation),
				AnnotationDeployment:            dep.Namespace + "/" + dep.Name,
				AnnotationDeploymentUID:         string(dep.UID),
			},
		},
		Immutable: &yes,
		Type:      corev1.SecretTypeOpaque,
		Data:      map[string][]byte{delivery.SecretKey: bytes.Clone(tok)},
	}, nil
}

// recordedDeployment is the Worker Deployment stage st records
// (AnnotationDeployment, AnnotationDeploymentUID); ok is false for a
// stage that records none (made before stages recorded it). One of the two
// annotations without the other, or a malformed one, is tamper.
func recordedDeployment(what string, st *corev1.Secret) (ns, name, uid string, ok bool, err error) {
	rec, hasRec := st.Annotations[AnnotationDeployment]
	uid, hasUID := st.Annotations[AnnotationDeploymentUID]
	if !hasRec && !hasUID {
		return "", "", "", false, nil
	}
	ns, name, cut := strings.Cut(rec, "/")
	if !cut || ns == "" || name == "" || strings.Contains(name, "/") || uid == "" {
		return "", "", "", false, fail.Errorf(fail.Tamper, "%s: annotations %s=%q, %s=%q do not name a Deployment (NAMESPACE/NAME and its UID): they were changed outside kubectl ql3 worker stage; inspect it", what, AnnotationDeployment, strictjson.Clip(rec), AnnotationDeploymentUID, strictjson.Clip(uid))
	}
	return ns, name, uid, true, nil
}

// checkRecorded refuses to publish stage st (staged for d) to dep unless
// st records dep itself: the same namespace/name (else tamper: the
// delivery, bound by digest, names it) and the same UID (else conflict:
// the Deployment was deleted and created again since the stage). A stage
// that records none is published to the Deployment its delivery names.
func (o *Options) checkRecorded(what string, st *corev1.Secret, dep *appsv1.Deployment) error {
	ns, name, uid, ok, err := recordedDeployment(what, st)
	switch {
	case err != nil:
		return err
	case !ok:
		o.Say.Printf("%s records no Deployment (staged by an older kubectl-ql3): publishing to %s/%s, which its delivery names", what, dep.Namespace, dep.Name)
		return nil
	case ns != dep.Namespace || name != dep.Name:
		return fail.Errorf(fail.Tamper, "%s records Deployment %s/%s, but its delivery targets %s/%s: the stage's annotations were changed; inspect it; nothing was written", what, ns, name, dep.Namespace, dep.Name)
	case uid != string(dep.UID):
		return fail.Errorf(fail.Conflict, "%s was staged for Deployment %s/%s with UID %s, but that Deployment now has UID %s (it was deleted and created again since): stage the credential again under a new deliveryId; nothing was written", what, ns, name, uid, dep.UID)
	}
	return nil
}

// checkStage validates a stage Secret read back for d: managed, immutable,
// Opaque, bound to d's exact digest, one key holding a valid token. It
// returns the token. A stage of another delivery under d's name is a
// conflict; a damaged one is tamper.
func checkStage(what string, s *corev1.Secret, d *delivery.Delivery) ([]byte, error) {
	dd, err := delivery.DeliveryDigest(d)
	if err != nil {
		return nil, err
	}
	switch {
	case s.Labels[LabelManagedBy] != ManagedBy || s.Labels[LabelStage] != "true":
		return nil, fail.Errorf(fail.Invalid, "%s exists but is not a kubectl-ql3 stage (labels %s=%s, %s=true missing): it cannot be adopted", what, LabelManagedBy, ManagedBy, LabelStage)
	case s.Annotations[AnnotationDeliveryDigest] != dd:
		return nil, fail.Errorf(fail.Conflict, "%s was staged for another delivery file with the same deliveryId %q: a delivery id names one delivery only; use a new deliveryId", what, d.DeliveryID)
	case s.Immutable == nil || !*s.Immutable || s.Type != corev1.SecretTypeOpaque || len(s.Data) != 1:
		return nil, fail.Errorf(fail.Tamper, "%s is not an immutable Opaque Secret with one key: it was changed outside kubectl ql3 worker stage; inspect it", what)
	}
	tok, ok := s.Data[delivery.SecretKey]
	if !ok || delivery.CheckToken(tok) != nil {
		return nil, fail.Errorf(fail.Tamper, "%s does not hold a valid %s: it was changed outside kubectl ql3 worker stage", what, delivery.SecretKey)
	}
	return tok, nil
}

// Stage writes d's immutable stage Secret holding tok (docs/worker.md,
// "worker stage"): review; read the stage; a stage already holding exactly
// d and tok is a replay; one holding another token or delivery is a
// conflict; else count live stages by label (at the cap: conflict) and
// create it through cas.Write, a lost answer settled by reading it back.
func Stage(ctx context.Context, o Options, d *delivery.Delivery, tok []byte) (*StageResult, error) {
	if err := delivery.CheckToken(tok); err != nil {
		return nil, err
	}
	if err := CheckStageNamespace(o.Namespace, o.StageNamespace); err != nil {
		return nil, err
	}
	if err := o.checkTarget(ctx, d); err != nil {
		return nil, err
	}
	ns, name, what := o.stageNS(), delivery.StageName(d.DeliveryID), o.stageWhat(d)
	if err := access.Require(ctx, o.Review, []access.Access{
		{Verb: "get", Group: "apps", Resource: "deployments", Namespace: o.Namespace, Name: d.Target.Deployment},
		{Verb: "get", Resource: "secrets", Namespace: ns, Name: name},
		{Verb: "list", Resource: "secrets", Namespace: ns},
		{Verb: "create", Resource: "secrets", Namespace: ns},
	}, o.Hint); err != nil {
		return nil, err
	}
	holds := func(cur *corev1.Secret) bool {
		got, err := checkStage(what, cur, d)
		return err == nil && bytes.Equal(got, tok)
	}
	s := cas.Swap[*corev1.Secret]{
		Client: o.Stages, Name: name, What: what, FieldManager: FieldManager,
		Policy: cas.Resend, Say: o.Say, SettleTimeout: o.SettleTimeout,
		Check:  func(cur *corev1.Secret) error { _, err := checkStage(what, cur, d); return err },
		Replay: holds,
		Build: func(ctx context.Context, _ *corev1.Secret, present bool) (*corev1.Secret, error) {
			if present {
				return nil, fail.Errorf(fail.Conflict, "%s already holds another token for delivery %q: a delivery id stages one token only; nothing was written", what, d.DeliveryID)
			}
			return o.buildStage(ctx, d, tok)
		},
		Landed: holds,
		Describe: func(cur *corev1.Secret, present bool) string {
			if !present {
				return "the stage was deleted"
			}
			return fmt.Sprintf("the stage holds another token (resourceVersion %s)", cur.ResourceVersion)
		},
		Refused: cas.MissingNamespace(ns),
	}
	got, err := s.Do(ctx)
	if err != nil {
		return nil, err
	}
	res := &StageResult{Namespace: ns, Name: name, DeliveryID: d.DeliveryID, Action: "created",
		UID: string(got.Object.UID), ResourceVersion: got.Object.ResourceVersion, Settled: got.Settled}
	if got.Replayed {
		res.Action = "replayed"
		o.Say.Printf("%s already holds exactly this delivery: nothing to write", what)
		return res, nil
	}
	o.Say.Printf("%s: created (immutable)", what)
	return res, nil
}

// buildStage is d's stage Secret holding tok, for a stage that does not
// exist yet: it records the Worker Deployment d targets, and only while
// the stage namespace is below the cap.
func (o *Options) buildStage(ctx context.Context, d *delivery.Delivery, tok []byte) (*corev1.Secret, error) {
	dep, err := o.stagedFor(ctx, d)
	if err != nil {
		return nil, err
	}
	if err := o.checkCap(ctx, o.stageNS()); err != nil {
		return nil, err
	}
	return StageSecret(o.stageNS(), d, tok, dep)
}

// checkCap counts the live stage Secrets of ns by label: at the cap, a
// new stage is a conflict.
func (o *Options) checkCap(ctx context.Context, ns string) error {
	list, err := o.Stages.List(ctx, metav1.ListOptions{LabelSelector: LabelStage + "=true," + LabelManagedBy + "=" + ManagedBy})
	if err != nil {
		return cas.Classify(cas.OpRead, "count the stage Secrets in namespace "+ns, err)
	}
	live := 0
	for _, s := range list.Items {
		if s.DeletionTimestamp == nil {
			live++
		}
	}
	if live >= o.cap() {
		return fail.Errorf(fail.Conflict, "namespace %s already holds %d live stage Secrets (the cap is %d): discard the stages of published or abandoned deliveries first (kubectl ql3 worker discard-stage); nothing was written", ns, live, o.cap())
	}
	return nil
}

// stagedFor reads the Worker Deployment d targets, which the stage records:
// absent is invalid (deploy the Worker first).
func (o *Options) stagedFor(ctx context.Context, d *delivery.Delivery) (*appsv1.Deployment, error) {
	dwhat := o.deploymentWhat(d.Target.Deployment)
	dep, present, err := cas.Read(ctx, o.Deployments, d.Target.Deployment, dwhat)
	if err != nil {
		return nil, err
	}
	if !present {
		return nil, fail.Errorf(fail.Invalid, "%s does not exist: deploy the Worker release first (a stage records the Deployment it is for); nothing was written", dwhat)
	}
	return dep, nil
}
