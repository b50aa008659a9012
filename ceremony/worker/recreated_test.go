package worker

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/qinglong/kubectl-ql3/ceremony/worker/delivery"
	"github.com/qinglong/kubectl-ql3/ceremony/worker/workertest"
	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// recreateFirst is the Deployment client of a publish whose Deployment
// someone deletes and creates again (same name, same shape, generation 1)
// just before the publish's first update reaches the API server (or, with
// atRead, just before publish reads it unstructured to send it back),
// which then answers 409.
type recreateFirst struct {
	dynamic.ResourceInterface
	t      *testing.T
	ns     string
	atRead bool
	done   atomic.Bool
}

func (r *recreateFirst) Get(ctx context.Context, name string, opts metav1.GetOptions, sub ...string) (*unstructured.Unstructured, error) {
	if r.atRead {
		r.recreate(ctx)
	}
	return r.ResourceInterface.Get(ctx, name, opts, sub...)
}

func (r *recreateFirst) Update(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions, sub ...string) (*unstructured.Unstructured, error) {
	if !r.atRead {
		r.recreate(ctx)
	}
	return r.ResourceInterface.Update(ctx, obj, opts, sub...)
}

// recreate deletes the Deployment and creates it again, the first time.
func (r *recreateFirst) recreate(ctx context.Context) {
	if !r.done.CompareAndSwap(false, true) {
		return
	}
	deps := cp.Clientset().AppsV1().Deployments(r.ns)
	old, err := deps.Get(ctx, depName, metav1.GetOptions{})
	if err == nil {
		err = deps.Delete(ctx, depName, metav1.DeleteOptions{})
	}
	if err == nil {
		again := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: old.Name, Namespace: old.Namespace, Labels: old.Labels}, Spec: old.Spec}
		_, err = deps.Create(ctx, again, metav1.CreateOptions{})
	}
	if err != nil {
		r.t.Error(err)
	}
}

// A Deployment deleted and created again while publish writes it is not
// the one the stage recorded: the 409 that follows must not lead publish
// to stamp the new object, which is also at generation 1 and well shaped
// — whether it was recreated before the update or before publish read it
// to send it back (the body is then the new object's, under the judged
// read's resourceVersion). Before, its retry compared only the generation
// and delivered to it.
func TestPublishRefusesADeploymentRecreatedMidWrite(t *testing.T) {
	for _, atRead := range []bool{false, true} {
		ns, stageNS := cp.Namespace(t), cp.Namespace(t)
		workertest.Create(t, cp.Clientset(), ns)
		o := options(t, cp.RESTConfig(), ns, stageNS)
		d := newDelivery(t, ns, "d-a", "cred-a", nil, 1)
		if _, err := Stage(context.Background(), o, d, token("A")); err != nil {
			t.Fatal(err)
		}
		before := getDep(t, ns).UID
		o.DeploymentObjects = &recreateFirst{ResourceInterface: o.DeploymentObjects, t: t, ns: ns, atRead: atRead}
		_, err := Publish(context.Background(), o, d)
		if !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), "was deleted and created again") {
			t.Fatalf("atRead %v: publish over a recreated Deployment: %v (class %v), want conflict naming it", atRead, err, fail.ClassOf(err))
		}
		now := getDep(t, ns)
		if now.UID == before {
			t.Fatalf("atRead %v: the Deployment was not recreated: the test did not run its case", atRead)
		}
		if id := now.Spec.Template.Annotations[delivery.AnnotationCredentialID]; id != "" {
			t.Fatalf("atRead %v: the recreated Deployment was stamped with credential %q", atRead, id)
		}
	}
}

// A PodTemplate that names a delivery is not a published delivery: publish
// of d-b crashed after its Secret write, and someone sets only the
// delivery-id annotation to d-b. discard-stage must keep the stage (it is
// all that can finish d-b), not delete it as published. Before, the one
// annotation decided.
func TestDiscardKeepsAStageNamedButNotPublished(t *testing.T) {
	ns, stageNS := cp.Namespace(t), cp.Namespace(t)
	workertest.Create(t, cp.Clientset(), ns)
	o := options(t, cp.User(t, "named", "system:masters"), ns, stageNS)
	stagePublish(t, o, newDelivery(t, ns, "d-a", "cred-a", nil, 1), token("A"))
	b := newDelivery(t, ns, "d-b", "cred-b", ptr("cred-a"), 2)
	if _, err := Stage(context.Background(), o, b, token("B")); err != nil {
		t.Fatal(err)
	}
	crashAfterSecret(t, o, b)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error { // the controller writes its status meanwhile
		dep := getDep(t, ns)
		dep.Spec.Template.Annotations[delivery.AnnotationDeliveryID] = "d-b"
		_, err := cp.Clientset().AppsV1().Deployments(ns).Update(context.Background(), dep, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_, err := Discard(context.Background(), o, "d-b", false)
	if !fail.Is(err, fail.Conflict) || !strings.Contains(err.Error(), "it is not published as publish leaves it") {
		t.Fatalf("discard of a stage the PodTemplate only names: %v (class %v), want conflict", err, fail.ClassOf(err))
	}
	if vs := cp.WriteVerbs(t, "named", stageNS, "secrets"); strings.Contains(strings.Join(vs, " "), "delete") {
		t.Fatalf("the refused discard deleted: %v", vs)
	}
}
