package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/qinglong/kubectl-ql3/inventory"
)

// fakeCluster holds objects in memory: an apply stores the object with a
// UID (and generation 1 when it has a spec); reads count requests and show
// every Deployment as not yet observed by its controller until readyAt.
// With holdLeaves, the apply of a leaf object (neither a Namespace nor a
// Deployment) waits until an applied object was read back: the test then
// knows the convergence read ran during the apply, without timing it.
// The Cluster interface is embedded only to satisfy it: the apply and the
// convergence read use Apply, Get and ListPage alone.
type fakeCluster struct {
	Cluster
	readyAt     time.Time
	allowList   bool
	holdLeaves  bool
	holdEnd     time.Time     // when every held apply gives up: one deadline for them all
	readBack    chan struct{} // closed at the first read that finds an object
	readOnce    sync.Once
	mu          sync.Mutex
	objs        map[inventory.Identity]*unstructured.Unstructured
	applyOrder  []inventory.Identity
	gets, lists atomic.Int64
}

func newFakeCluster(readyAt time.Time, allowList bool) *fakeCluster {
	return &fakeCluster{readyAt: readyAt, allowList: allowList, readBack: make(chan struct{}), holdEnd: time.Now().Add(30 * time.Second), objs: map[inventory.Identity]*unstructured.Unstructured{}}
}

func (c *fakeCluster) Apply(ctx context.Context, obj *unstructured.Unstructured, _ string, _, dryRun bool) (*unstructured.Unstructured, error) {
	if dryRun {
		return nil, errors.New("no dry-run here")
	}
	c.mu.Lock()
	c.applyOrder = append(c.applyOrder, identityOf(obj)) // the order requests are sent
	c.mu.Unlock()
	if k := obj.GetKind(); c.holdLeaves && k != "Namespace" && k != "Deployment" {
		select {
		case <-c.readBack:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Until(c.holdEnd)):
			return nil, fmt.Errorf("apply of %s held for 30s: no applied object was read back while the apply went on", identityOf(obj))
		}
	}
	u := obj.DeepCopy()
	u.SetUID(types.UID("uid-" + u.GetKind() + "-" + u.GetName()))
	if _, ok := u.Object["spec"]; ok {
		u.SetGeneration(1)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.objs[identityOf(u)] = u
	return u.DeepCopy(), nil
}

// observed is what a read shows: a Deployment has a status only once
// readyAt has passed.
func (c *fakeCluster) observed(u *unstructured.Unstructured) *unstructured.Unstructured {
	u = u.DeepCopy()
	if u.GetKind() == "Deployment" && !time.Now().Before(c.readyAt) {
		u.Object["status"] = map[string]any{
			"observedGeneration": int64(1), "replicas": int64(0), "updatedReplicas": int64(0),
			"readyReplicas": int64(0), "availableReplicas": int64(0),
			"conditions": []any{
				map[string]any{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
				map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"},
			},
		}
	}
	return u
}

func (c *fakeCluster) Get(_ context.Context, id inventory.Identity) (*unstructured.Unstructured, error) {
	c.gets.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	u, ok := c.objs[id]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: strings.ToLower(id.Kind) + "s"}, id.Name)
	}
	c.readOnce.Do(func() { close(c.readBack) })
	return c.observed(u), nil
}

func (c *fakeCluster) ListPage(_ context.Context, gvk schema.GroupVersionKind, ns string, _ metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	c.lists.Add(1)
	if !c.allowList {
		return nil, apierrors.NewForbidden(schema.GroupResource{Resource: strings.ToLower(gvk.Kind) + "s"}, "", errors.New("no list grant"))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	list := &unstructured.UnstructuredList{}
	for id, u := range c.objs {
		if id.Kind == gvk.Kind && id.Namespace == ns && u.GroupVersionKind() == gvk {
			list.Items = append(list.Items, *c.observed(u))
			c.readOnce.Do(func() { close(c.readBack) })
		}
	}
	return list, nil
}

func (c *fakeCluster) ResetMapper() {}

// mixObjects is a release of configMaps ConfigMaps, deployments Deployments
// and one Namespace, in inventory order.
func mixObjects(configMaps, deployments int) []*unstructured.Unstructured {
	var objs []*unstructured.Unstructured
	for i := range deployments {
		objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": fmt.Sprintf("d-%03d", i), "namespace": "app"},
			"spec":     map[string]any{"replicas": int64(0)},
		}})
	}
	for i := range configMaps {
		objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprintf("c-%03d", i), "namespace": "app"},
			"data":     map[string]any{"k": "v"},
		}})
	}
	objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "app"},
	}})
	return objs
}

// expectedConverge is the converge transcript computed from its definition
// (docs/head.md §5): one entry per object in inventory order, with the UID
// and generation the fake cluster gives.
func expectedConverge(t *testing.T, objs []*unstructured.Unstructured) string {
	t.Helper()
	var recs []objectResult
	for _, u := range objs {
		r := objectResult{ID: identityOf(u), Result: "Current", UID: "uid-" + u.GetKind() + "-" + u.GetName()}
		if _, ok := u.Object["spec"]; ok {
			r.Generation = 1
		}
		recs = append(recs, r)
	}
	sortResults(recs)
	d, err := transcriptDigest("converge", recs)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func sortResults(rs []objectResult) {
	slices.SortFunc(rs, func(a, b objectResult) int { return inventory.Compare(a.ID, b.ID) })
}

// With 200 objects waiting on a controller for 2 s and no `list` grant
// (one GET per object), a fixed 200 ms poll would read every object about
// 11 times (2,200 GETs); the adaptive backoff pauses at least as long as
// its last poll's requests take at 50 requests a second, and reads each
// object twice.
func TestConvergeBacksOffWithManyWaiting(t *testing.T) {
	const n = 200
	wait := 2 * time.Second
	objs := mixObjects(0, n)
	objs = objs[:len(objs)-1] // no Namespace: every object waits
	c := newFakeCluster(time.Now().Add(wait), false)
	o := &Options{Cluster: c, Parallelism: 16, Timeout: time.Minute, Progress: io.Discard}
	var applied []objectResult
	for _, u := range objs {
		got, err := c.Apply(context.Background(), u, "m", false, false)
		if err != nil {
			t.Fatal(err)
		}
		applied = append(applied, objectResult{ID: identityOf(got), Result: "applied", UID: string(got.GetUID()), Generation: got.GetGeneration()})
	}
	start := time.Now()
	d, err := o.converge(context.Background(), applied, &Head{Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if want := expectedConverge(t, objs); d != want {
		t.Fatalf("converge digest %s, want %s", d, want)
	}
	fixed := int64(n) * int64(wait/(200*time.Millisecond)+1)
	gets := c.gets.Load()
	t.Logf("%d GET and %d LIST in %s; a fixed 200 ms poll: about %d GET", gets, c.lists.Load(), took.Round(time.Millisecond), fixed)
	if gets > fixed/4 {
		t.Fatalf("%d GETs, want at most a quarter of the fixed poll's %d", gets, fixed)
	}
	if gets < 2*n {
		t.Fatalf("%d GETs: every object must be read at least twice (not yet Current, then Current)", gets)
	}
	if took > wait+convergeMaxPause+2*time.Second {
		t.Fatalf("converged after %s: the backoff waited far beyond readiness at %s", took, wait)
	}
}

// The pipelined apply: Namespaces first, then the Deployments (controller
// kinds) before the leaf objects; reads start during the apply; and the
// converge transcript is byte-identical to a convergence read made only
// after the whole apply.
func TestApplyAllPipelinesConvergence(t *testing.T) {
	for _, allowList := range []bool{true, false} {
		t.Run(fmt.Sprintf("list=%v", allowList), func(t *testing.T) {
			objs := mixObjects(40, 6)
			sortObjs(objs)
			c := newFakeCluster(time.Now().Add(300*time.Millisecond), allowList)
			c.holdLeaves = true // the ConfigMaps wait for the first object read back
			o := &Options{Cluster: c, Parallelism: 1, Timeout: time.Minute, Progress: io.Discard}
			applied, err := o.applyAll(context.Background(), objs, "m", false, &Head{Generation: 1})
			if err != nil {
				t.Fatal(err)
			}
			if o.conv == nil {
				t.Fatal("applyAll did not hand its convergence read to converge")
			}
			readDuringApply := c.gets.Load() + c.lists.Load()
			d, err := o.converge(context.Background(), applied, &Head{Generation: 1})
			if err != nil {
				t.Fatal(err)
			}
			if want := expectedConverge(t, objs); d != want {
				t.Fatalf("pipelined converge digest %s, want %s", d, want)
			}
			fresh := &Options{Cluster: c, Parallelism: 4, Timeout: time.Minute, Progress: io.Discard}
			d2, err := fresh.converge(context.Background(), applied, &Head{Generation: 1})
			if err != nil {
				t.Fatal(err)
			}
			if d2 != d {
				t.Fatalf("a read after the whole apply gives %s, the pipelined one %s", d2, d)
			}
			// Apply order: the Namespace, then every Deployment, then the rest.
			order := c.applyOrder
			if order[0].Kind != "Namespace" {
				t.Fatalf("first applied %s, want the Namespace", order[0])
			}
			for i, id := range order[1:] {
				if (id.Kind == "Deployment") != (i < 6) {
					t.Fatalf("apply order %v: the 6 Deployments must follow the Namespace, before any ConfigMap", order)
				}
			}
			if readDuringApply == 0 {
				t.Fatal("no object was read back while the apply went on")
			}
		})
	}
}

func sortObjs(objs []*unstructured.Unstructured) {
	slices.SortFunc(objs, func(a, b *unstructured.Unstructured) int { return inventory.Compare(identityOf(a), identityOf(b)) })
}
