package worker

import (
	"context"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// RoleLabel = RoleValue marks the Worker Deployment and its PodTemplate.
const (
	RoleLabel = "qinglong.io/role"
	RoleValue = "worker"
)

// CrashAfterSecret is the crash point between the two writes of publish.
const CrashAfterSecret = "worker-after-secret"

// Result is a completed publish: ids, versions and digests, never the token.
type Result struct {
	Namespace         string `json:"namespace"`
	Deployment        string `json:"deployment"`
	DeliveryID        string `json:"deliveryId"`
	CredentialID      string `json:"credentialId"`
	Generation        int64  `json:"deploymentGeneration"`
	TargetDigest      string `json:"targetDigest"`
	PublicationDigest string `json:"publicationDigest"`
	// Secret is "created", "updated" or "unchanged" (it already held the
	// staged token: not rewritten).
	Secret string `json:"secret"`
	// Deployment is "updated" or "unchanged" (it already carried the
	// delivery: a replay).
	DeploymentAction string `json:"deploymentAction"`
	// SecretVersion and DeploymentVersion are the resourceVersions now.
	SecretVersion     string `json:"secretResourceVersion"`
	DeploymentVersion string `json:"deploymentResourceVersion"`
	// Settled: an answer was lost (or a 409) and reading back showed the
	// object held exactly this delivery.
	Settled bool `json:"settled,omitempty"`
	// Rollout is RolloutNotWaited or RolloutAvailable (what was verified
	// of the Worker's rollout); ReplicaSet and Pod name the new
	// ReplicaSet and its Available pod when it is RolloutAvailable.
	Rollout    string `json:"rollout"`
	ReplicaSet string `json:"replicaSet,omitempty"`
	Pod        string `json:"pod,omitempty"`
}

// CheckDeployment validates the Worker Deployment for d (ADR-0239 §2
// step 1): one replica, Recreate, the worker role label on it and its
// PodTemplate, not being deleted, and a projected volume whose Secret
// source names the credential Secret with the credential key as an item.
// Errors are invalid (exit 2) and say what to fix.
func CheckDeployment(dep *appsv1.Deployment, what string) error {
	bad := func(format string, args ...any) error {
		return fail.Errorf(fail.Invalid, "%s is not a Worker Deployment kubectl ql3 worker publish can roll: "+format+"; nothing was written", append([]any{what}, args...)...)
	}
	switch {
	case dep.DeletionTimestamp != nil:
		return bad("it is being deleted")
	case dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1:
		return bad("spec.replicas is not 1")
	case dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType:
		return bad("spec.strategy.type is %q, not Recreate", dep.Spec.Strategy.Type)
	case dep.Labels[RoleLabel] != RoleValue || dep.Spec.Template.Labels[RoleLabel] != RoleValue:
		return bad("it and its PodTemplate must carry the label %s=%s", RoleLabel, RoleValue)
	}
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.Secret == nil || src.Secret.Name != delivery.SecretName {
				continue
			}
			for _, it := range src.Secret.Items {
				if it.Key == delivery.SecretKey {
					return nil
				}
			}
		}
	}
	return bad("no projected volume references Secret %s key %s", delivery.SecretName, delivery.SecretKey)
}

// CredentialSecret is the credential Secret holding tok: from cur (an
// update: its metadata kept, resourceVersion carried) or new.
func CredentialSecret(ns string, tok []byte, cur *corev1.Secret) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: delivery.SecretName, Namespace: ns}}
	if cur != nil {
		s = cur.DeepCopy()
	}
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Labels[LabelManagedBy] = ManagedBy
	s.Labels[LabelCredential] = "true"
	s.Type = corev1.SecretTypeOpaque
	s.Data = map[string][]byte{delivery.SecretKey: append([]byte(nil), tok...)}
	s.StringData = nil
	return s
}

// Stamped is dep with the five annotations of want added to its
// PodTemplate and nothing else changed; its resourceVersion is dep's.
func Stamped(dep *appsv1.Deployment, want delivery.Stamp) *appsv1.Deployment {
	out := dep.DeepCopy()
	if out.Spec.Template.Annotations == nil {
		out.Spec.Template.Annotations = map[string]string{}
	}
	maps.Copy(out.Spec.Template.Annotations, want)
	return out
}

// Publish publishes d (docs/worker.md, "worker publish"), in ADR-0239's
// order: review the reads; check the target cluster and namespace; read
// and validate the Deployment; read the stage (the token); before any
// Secret write, judge the PodTemplate's credential annotations (the exact
// predecessor, or a replay); review the writes, the Deployment update
// included; read the credential Secret — equal to the stage it is not
// rewritten, holding the predecessor's token (its keyed digest equals the
// PodTemplate's) it is updated with that read's resourceVersion, absent
// (first delivery) it is created, anything else is another publisher's
// token: conflict; then update the Deployment carrying the resourceVersion
// of its read, only the five annotations added. Every lost answer or 409
// is settled by reading back: success only when the object holds exactly
// this delivery. With o.Wait, it then waits (GET and LIST polling, never a
// watch) until the new credential's pod is Available and no pod of an
// older ReplicaSet is left; a wait that times out is an unavailable error
// (exit 4) saying what was and was not verified.
func Publish(ctx context.Context, o Options, d *delivery.Delivery) (*Result, error) {
	if o.DeploymentObjects == nil { // before any write: roll needs it after the Secret's
		return nil, fail.Errorf(fail.Other, "worker publish: no unstructured Deployment client (Options.DeploymentObjects)")
	}
	dn := d.Target.Deployment
	dep, tok, err := o.readTarget(ctx, d)
	if err != nil {
		return nil, err
	}
	targetDigest, err := delivery.TargetDigest(d.Target)
	if err != nil {
		return nil, err
	}
	tokDigest, err := delivery.TokenDigest(o.Key, targetDigest, d.CredentialID, tok)
	if err != nil {
		return nil, err
	}
	want, target, err := delivery.StampOf(d, tokDigest)
	if err != nil {
		return nil, err
	}
	res := &Result{Namespace: o.Namespace, Deployment: dn, DeliveryID: d.DeliveryID, CredentialID: d.CredentialID, Generation: d.Generation,
		TargetDigest: target, PublicationDigest: want[delivery.AnnotationPublicationDigest]}
	// 2. The predecessor, before any Secret write.
	verdict, err := delivery.Judge(d, want, dep.Spec.Template.Annotations)
	if err != nil {
		return nil, err
	}
	// 3. Permission for both writes (and the reads of the wait) before
	// the first write.
	needs := []access.Access{
		{Verb: "update", Group: "apps", Resource: "deployments", Namespace: o.Namespace, Name: dn},
		{Verb: "update", Resource: "secrets", Namespace: o.Namespace, Name: delivery.SecretName},
		{Verb: "create", Resource: "secrets", Namespace: o.Namespace},
	}
	if o.Wait > 0 {
		needs = append(needs, waitNeeds(o.Namespace)...)
	}
	if err := access.Require(ctx, o.Review, needs, o.Hint); err != nil {
		return nil, err
	}
	res.Rollout = RolloutNotWaited
	replayed, err := o.publishSecret(ctx, d, dep, tok, verdict, target, res)
	if err != nil {
		return nil, err
	}
	if replayed {
		return o.maybeWait(ctx, d, dn, want, res)
	}
	if o.Crash != nil {
		o.Crash(CrashAfterSecret)
	}
	// 4. The PodTemplate, carrying the Deployment read's resourceVersion.
	got, err := o.roll(ctx, d, dep, want)
	if err != nil {
		return nil, err
	}
	res.DeploymentAction, res.DeploymentVersion = "updated", got.Object.ResourceVersion
	res.Settled = res.Settled || got.Settled
	// 5. Both objects, read back, hold exactly the delivery.
	if err := o.verify(ctx, d, dn, tok, want); err != nil {
		return nil, err
	}
	o.Say.Printf("%s: carries credential %q (generation %d) and %s holds its token: written and read back; the rollout has started", o.deploymentWhat(dn), d.CredentialID, d.Generation, o.secretWhat())
	return o.maybeWait(ctx, d, dn, want, res)
}

// maybeWait waits for the rollout of want when o.Wait is set and returns
// res, completed by the wait; a wait that fails is only its error (what was
// written and verified is in its message).
func (o *Options) maybeWait(ctx context.Context, d *delivery.Delivery, dn string, want delivery.Stamp, res *Result) (*Result, error) {
	if o.Wait > 0 {
		if err := o.waitRollout(ctx, d, dn, want, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// readTarget checks the stage namespace, the key, the permission of the
// reads and the target cluster and namespace; then reads and validates the
// Worker Deployment (1.) and reads the stage, returning the token (never
// from the caller again).
func (o *Options) readTarget(ctx context.Context, d *delivery.Delivery) (*appsv1.Deployment, []byte, error) {
	dn := d.Target.Deployment
	dwhat, stwhat := o.deploymentWhat(dn), o.stageWhat(d)
	stage := delivery.StageName(d.DeliveryID)
	if err := CheckStageNamespace(o.Namespace, o.StageNamespace); err != nil {
		return nil, nil, err
	}
	if len(o.Key) < delivery.MinKeyBytes {
		return nil, nil, fail.Errorf(fail.Invalid, "the token digest key is %d bytes, want at least %d", len(o.Key), delivery.MinKeyBytes)
	}
	if err := access.Require(ctx, o.Review, []access.Access{
		{Verb: "get", Group: "apps", Resource: "deployments", Namespace: o.Namespace, Name: dn},
		{Verb: "get", Resource: "secrets", Namespace: o.Namespace, Name: delivery.SecretName},
		{Verb: "get", Resource: "secrets", Namespace: o.stageNS(), Name: stage},
	}, o.Hint); err != nil {
		return nil, nil, err
	}
	if err := o.checkTarget(ctx, d); err != nil {
		return nil, nil, err
	}
	dep, present, err := cas.Read(ctx, o.Deployments, dn, dwhat)
	if err != nil {
		return nil, nil, err
	}
	if !present {
		return nil, nil, fail.Errorf(fail.Invalid, "%s does not exist: deploy the Worker release first; nothing was written", dwhat)
	}
	if err := CheckDeployment(dep, dwhat); err != nil {
		return nil, nil, err
	}
	st, present, err := cas.Read(ctx, o.Stages, stage, stwhat)
	if err != nil {
		return nil, nil, err
	}
	if !present {
		return nil, nil, fail.Errorf(fail.Invalid, "%s does not exist: run kubectl ql3 worker stage for delivery %q first; nothing was written", stwhat, d.DeliveryID)
	}
	tok, err := checkStage(stwhat, st, d)
	if err != nil {
		return nil, nil, err
	}
	return dep, tok, o.checkRecorded(stwhat, st, dep)
}

// publishSecret reads the credential Secret and writes tok into it unless
// it holds it already (res records which); replayed when the Deployment
// (verdict) and the Secret both already hold the delivery: then nothing is
// to write at all.
func (o *Options) publishSecret(ctx context.Context, d *delivery.Delivery, dep *appsv1.Deployment, tok []byte, verdict delivery.Verdict, target string, res *Result) (replayed bool, err error) {
	dwhat, swhat := o.deploymentWhat(dep.Name), o.secretWhat()
	s := cas.Swap[*corev1.Secret]{
		Client: o.Secrets, Name: delivery.SecretName, What: swhat, FieldManager: FieldManager,
		Policy: cas.Resend, Say: o.Say, SettleTimeout: o.SettleTimeout,
		Landed: func(cur *corev1.Secret) bool { return holdsToken(cur, tok) },
		Describe: func(cur *corev1.Secret, present bool) string {
			if !present {
				return "the credential Secret was deleted"
			}
			return "the credential Secret now holds another token (resourceVersion " + cur.ResourceVersion + "): another publisher"
		},
		Refused: func(op cas.Op, err error) error {
			if op == cas.OpCreate && apierrors.IsNotFound(err) {
				return fail.Errorf(fail.Invalid, "namespace %q does not exist (%v)", o.Namespace, err)
			}
			return nil
		},
	}
	sec, present, err := s.Read(ctx)
	if err != nil {
		return false, err
	}
	if present && sec.Type != corev1.SecretTypeOpaque {
		return false, fail.Errorf(fail.Tamper, "%s is not an Opaque Secret: it was changed outside kubectl ql3 worker publish; nothing was written", swhat)
	}
	if verdict == delivery.Replay {
		if !present || !holdsToken(sec, tok) {
			return false, fail.Errorf(fail.Conflict, "%s carries delivery %q but %s no longer holds its token: it was changed after the publication; inspect it; nothing was written", dwhat, d.DeliveryID, swhat)
		}
		res.Secret, res.DeploymentAction, res.SecretVersion, res.DeploymentVersion = "unchanged", "unchanged", sec.ResourceVersion, dep.ResourceVersion
		o.Say.Printf("%s already carries delivery %q and %s holds its token: nothing to write", dwhat, d.DeliveryID, swhat)
		return true, nil
	}
	if present && holdsToken(sec, tok) {
		res.Secret, res.SecretVersion = "unchanged", sec.ResourceVersion
		o.Say.Printf("%s already holds this delivery's token: not rewritten", swhat)
		return false, nil
	}
	if err := o.mayReplace(d, sec, present, dep.Spec.Template.Annotations, target, swhat); err != nil {
		return false, err
	}
	res.Secret = "created"
	if present {
		res.Secret = "updated"
	}
	got, err := s.Write(ctx, sec, present, CredentialSecret(o.Namespace, tok, sec))
	if err != nil {
		return false, err
	}
	res.SecretVersion, res.Settled = got.Object.ResourceVersion, got.Settled
	o.Say.Printf("%s: %s", swhat, res.Secret)
	return false, nil
}

// mayReplace decides whether the credential Secret read (sec, present)
// may be replaced by d's token: absent only for a first delivery; present
// only holding the predecessor's token, proven by its keyed digest equal
// to the PodTemplate's token digest annotation. Anything else is a token
// another publisher wrote and has not yet rolled: conflict.
func (o *Options) mayReplace(d *delivery.Delivery, sec *corev1.Secret, present bool, ann map[string]string, target, what string) error {
	if !present {
		if d.Predecessor != nil {
			return fail.Errorf(fail.Conflict, "%s does not exist, but the PodTemplate carries credential %q: it was deleted behind the rollout; inspect it; nothing was written", what, *d.Predecessor)
		}
		return nil
	}
	if d.Predecessor == nil {
		return fail.Errorf(fail.Conflict, "%s already holds a token no published delivery accounts for (another first delivery is in flight, or one was abandoned half-way): finish that delivery with its own publish, or delete the Secret if you know it is stale; nothing was written", what)
	}
	v := sec.Data[delivery.SecretKey]
	pd, err := delivery.TokenDigest(o.Key, target, *d.Predecessor, v)
	if err != nil {
		return err
	}
	if len(sec.Data) != 1 || pd != ann[delivery.AnnotationTokenDigest] {
		return fail.Errorf(fail.Conflict, "%s does not hold the token of the published credential %q: another publisher wrote its token and has not rolled the Deployment yet (or the token digest key differs from the one that published %q); nothing was written", what, *d.Predecessor, *d.Predecessor)
	}
	return nil
}

// verify reads both objects once more: success only when both hold d.
func (o *Options) verify(ctx context.Context, d *delivery.Delivery, dn string, tok []byte, want delivery.Stamp) error {
	dep, present, err := cas.Read(ctx, o.Deployments, dn, o.deploymentWhat(dn))
	if err != nil {
		return err
	}
	if !present || !delivery.Carries(dep.Spec.Template.Annotations, want) {
		return fail.Errorf(fail.Conflict, "%s no longer carries delivery %q right after it was written: another writer moved it; rerun to judge again", o.deploymentWhat(dn), d.DeliveryID)
	}
	sec, present, err := cas.Read(ctx, o.Secrets, delivery.SecretName, o.secretWhat())
	if err != nil {
		return err
	}
	if !present || !holdsToken(sec, tok) {
		return fail.Errorf(fail.Conflict, "%s no longer holds delivery %q's token right after the rollout: another writer moved it; inspect it", o.secretWhat(), d.DeliveryID)
	}
	return nil
}

// statusRetries bounds the rereads of roll when only the Deployment's
// status moved.
const statusRetries = 5

// roll updates the Deployment dep (validated and judged) to carry want,
// with dep's resourceVersion. The Deployment controller writes the status
// all the time, and each status write moves the resourceVersion: a
// conflict whose reread shows the same metadata.generation (the spec,
// PodTemplate included, unchanged) is read, validated and judged again
// and sent again with the new resourceVersion, a bounded number of times;
// a conflict with a new generation (someone changed the spec) is a
// conflict, except when the winner carries exactly this delivery.
func (o *Options) roll(ctx context.Context, d *delivery.Delivery, dep *appsv1.Deployment, want delivery.Stamp) (cas.Result[*appsv1.Deployment], error) {
	dwhat := o.deploymentWhat(dep.Name)
	for attempt := 1; ; attempt++ {
		served, err := o.servedDeployment(ctx, dep.Name)
		if err != nil {
			return cas.Result[*appsv1.Deployment]{}, err
		}
		dw := cas.Write[*appsv1.Deployment]{
			Client: keptFields{o.Deployments, o, served}, What: dwhat, Desired: Stamped(dep, want), FieldManager: FieldManager,
			Policy: cas.Resend, Say: o.Say, SettleTimeout: o.SettleTimeout,
			Landed: func(cur *appsv1.Deployment) bool { return delivery.Carries(cur.Spec.Template.Annotations, want) },
			Describe: func(cur *appsv1.Deployment, present bool) string {
				if !present {
					return "the Deployment was deleted"
				}
				return fmt.Sprintf("the Deployment changed (resourceVersion %s, generation %d, credential %q)", cur.ResourceVersion, cur.Generation, cur.Spec.Template.Annotations[delivery.AnnotationCredentialID])
			},
		}
		got, err := dw.Do(ctx)
		if err == nil || !fail.Is(err, fail.Conflict) || attempt > statusRetries {
			return got, err
		}
		cur, present, rerr := cas.Read(ctx, o.Deployments, dep.Name, dwhat)
		if rerr != nil {
			return got, rerr
		}
		if !present || cur.Generation != dep.Generation {
			return got, err
		}
		if cur.UID != dep.UID {
			// Deleted and created again: a new object at generation 1 too.
			return got, fail.Errorf(fail.Conflict, "%s was deleted and created again while this publish wrote it (uid %s, was %s): nothing was written to it; stage again for the new Deployment", dwhat, cur.UID, dep.UID)
		}
		if cerr := CheckDeployment(cur, dwhat); cerr != nil {
			return got, cerr
		}
		v, jerr := delivery.Judge(d, want, cur.Spec.Template.Annotations)
		if jerr != nil {
			return got, jerr
		}
		if v == delivery.Replay {
			return cas.Result[*appsv1.Deployment]{Object: cur, Settled: true}, nil
		}
		o.Say.Printf("%s: only its status moved (resourceVersion %s): sending the update again on that version", dwhat, cur.ResourceVersion)
		dep = cur
	}
}
