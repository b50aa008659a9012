// Package worker publishes a Worker credential (ADR-0239, docs/worker.md):
// stage the token in an immutable stage Secret, publish it into the
// credential Secret and the Worker Deployment's PodTemplate, each under
// its own resourceVersion compare-and-swap on the cas kernel, and discard
// a stage once its delivery is published or abandoned.
//
// No function of this package prints, logs or returns a token, and none
// reads or writes the TLS identity Secret.
package worker

import (
	"bytes"
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// Labels, annotations and the field manager of the Secrets this package
// writes (docs/worker.md, "The Secrets").
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "kubectl-ql3"
	// LabelStage = "true" marks a stage Secret; the stage cap counts them.
	LabelStage = "qinglong.io/worker-credential-stage"
	// LabelCredential = "true" marks the credential Secret.
	LabelCredential = "qinglong.io/worker-credential"
	// AnnotationDeliveryDigest binds a stage to its delivery file.
	AnnotationDeliveryDigest = "qinglong.io/worker-delivery-digest"
	// AnnotationDeployment records, on a stage, the Worker Deployment it
	// was staged for ("NAMESPACE/NAME"), AnnotationDeploymentUID its UID:
	// publish and discard-stage use the recorded Deployment, not a flag.
	AnnotationDeployment    = "qinglong.io/worker-deployment"
	AnnotationDeploymentUID = "qinglong.io/worker-deployment-uid"
	// FieldManager is the field manager of every write.
	FieldManager = "kubectl-ql3-worker"
	// DefaultStageCap is the default bound on live stage Secrets.
	DefaultStageCap = 8
)

// SecretClient is the Secret API of one namespace; client-go's
// cs.CoreV1().Secrets(ns) satisfies it. List is used only to count stage
// Secrets (stage), Delete only by discard-stage.
type SecretClient interface {
	cas.Client[*corev1.Secret]
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.SecretList, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// Options are the clients and settings of one Worker target.
type Options struct {
	// Namespace holds the credential Secret and the Deployment.
	Namespace string
	// Secrets is Namespace's Secret client.
	Secrets cas.Client[*corev1.Secret]
	// Deployments is Namespace's Deployment client.
	// DeploymentName names the Worker Deployment for discard-stage: it
	// must agree with the Deployment the stage records, and is used only
	// for a stage made before stages recorded it. Stage and publish take
	// it from the delivery.
	DeploymentName string
	Deployments    cas.Client[*appsv1.Deployment]
	// DeploymentObjects is Namespace's Deployments as unstructured
	// objects: publish's update reads the Deployment through it and sends
	// it back with only its PodTemplate's annotations replaced (keptFields),
	// so the fields a newer API server knows and this build's types do
	// not are kept, never dropped.
	DeploymentObjects dynamic.ResourceInterface
	// StageNamespace holds the stage Secrets; it must be set and differ
	// from Namespace (CheckStageNamespace).
	StageNamespace string
	// Stages is StageNamespace's Secret client.
	Stages SecretClient
	// StageCap bounds live stage Secrets (DefaultStageCap when 0).
	StageCap int
	// ClusterIdentity reads the live cluster's identity digest.
	ClusterIdentity func(ctx context.Context) (string, error)
	// Key keys the token digest (at least delivery.MinKeyBytes).
	Key []byte
	// Review answers the permission review (access.NewReview).
	Review *access.Review
	// Hint ends a missing-permission error.
	Hint string
	// Say reports progress (never a token); nil is quiet.
	Say cas.Progress
	// Crash is called at the named points of publish ("after-secret":
	// the credential Secret holds the token, the Deployment is not yet
	// updated); the CLI passes crashpoint.At. Nil does nothing.
	Crash func(point string)
	// SettleTimeout bounds the reads that settle a lost answer (cas
	// default when 0).
	SettleTimeout time.Duration
	// Wait, above zero, makes publish wait after its writes (or its
	// replay), at most that long, until the new credential's pod is
	// Available and no pod of an older ReplicaSet is left
	// (docs/worker.md, "worker publish"); zero does not wait.
	Wait time.Duration
	// ReplicaSets and Pods list Namespace's ReplicaSets and pods; only
	// a publish that waits uses them.
	ReplicaSets Lister[*appsv1.ReplicaSetList]
	Pods        Lister[*corev1.PodList]
}

func (o *Options) stageNS() string { return o.StageNamespace }

// CheckStageNamespace refuses a stage namespace that is empty or the
// Worker's own (fail.Invalid): token-bearing stage Secrets must never sit
// next to the identity Secret, and the stage rules of the least privilege
// (list; get and delete of per-delivery names) cannot be limited by name,
// so in the Worker's namespace they would reach it.
func CheckStageNamespace(ns, stageNS string) error {
	if stageNS == "" || stageNS == ns {
		return fail.Errorf(fail.Invalid, "--stage-namespace: give a namespace of its own for the stage Secrets (not %q, the Worker's): stage Secrets hold tokens and must not sit next to %s, and the stage rules (list, and get/delete of per-delivery names) cannot be limited by name; create one (kubectl create namespace %s-stages) and pass it to stage, publish, discard-stage and rbac", ns, delivery.IdentitySecret, ns)
	}
	return nil
}

func (o *Options) cap() int {
	if o.StageCap <= 0 {
		return DefaultStageCap
	}
	return o.StageCap
}

func (o *Options) secretWhat() string {
	return "credential Secret " + o.Namespace + "/" + delivery.SecretName
}

func (o *Options) stageWhat(d *delivery.Delivery) string {
	return "stage Secret " + o.stageNS() + "/" + delivery.StageName(d.DeliveryID)
}

func (o *Options) deploymentWhat(name string) string {
	return "Worker Deployment " + o.Namespace + "/" + name
}

// checkTarget refuses a delivery for another namespace or cluster.
func (o *Options) checkTarget(ctx context.Context, d *delivery.Delivery) error {
	if d.Target.Namespace != o.Namespace {
		return fail.Errorf(fail.Invalid, "delivery %q targets namespace %q, not %q: pass -n %s", d.DeliveryID, d.Target.Namespace, o.Namespace, d.Target.Namespace)
	}
	if o.ClusterIdentity == nil {
		return fail.Errorf(fail.Other, "no cluster identity reader")
	}
	id, err := o.ClusterIdentity(ctx)
	if err != nil {
		return err
	}
	if id != d.Target.ClusterIdentity {
		return fail.Errorf(fail.Invalid, "delivery %q targets cluster %s, but this cluster is %s (kubectl ql3 version): check --context", d.DeliveryID, d.Target.ClusterIdentity, id)
	}
	return nil
}

// holdsToken reports whether s is a credential Secret holding exactly tok.
func holdsToken(s *corev1.Secret, tok []byte) bool {
	v, ok := s.Data[delivery.SecretKey]
	return ok && len(s.Data) == 1 && s.Type == corev1.SecretTypeOpaque && bytes.Equal(v, tok)
}
