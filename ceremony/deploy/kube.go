package deploy

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// Cluster is the narrow view of the API server the ceremony needs. The
// real implementation is NewKubeCluster; tests drive it against a real
// kube-apiserver, with faults injected in its transport.
type Cluster interface {
	IdentityReader
	// Reviewer answers permission reviews: a required capability, so that
	// the access check can never be skipped by wrapping a cluster.
	access.Reviewer
	// Heads is the exact-object client of ConfigMaps in the control
	// namespace ns, through which the Head is read and written (cas).
	Heads(ns string) cas.Client[*corev1.ConfigMap]
	// Apply server-side applies obj with the field manager (dryRun=All when dryRun).
	Apply(ctx context.Context, obj *unstructured.Unstructured, fieldManager string, force, dryRun bool) (*unstructured.Unstructured, error)
	// Get reads one object; a missing object is a NotFound error.
	Get(ctx context.Context, id inventory.Identity) (*unstructured.Unstructured, error)
	// Delete deletes one object with the given options (preconditions,
	// dryRun); a missing object is a NotFound error.
	Delete(ctx context.Context, id inventory.Identity, opts metav1.DeleteOptions) error
	// ListPage reads one page of a kind in a namespace ("" for a
	// cluster-scoped kind): the convergence read's fast path, which falls
	// back to Get by name when the caller may not list.
	ListPage(ctx context.Context, gvk schema.GroupVersionKind, ns string, opts metav1.ListOptions) (*unstructured.UnstructuredList, error)
	// Watch watches the one object id from resourceVersion rv, with a
	// field selector on its name (which RBAC authorizes by name): what
	// wakes converge's poll early, never what it records.
	Watch(ctx context.Context, id inventory.Identity, rv string) (watch.Interface, error)
	// Mapper resolves kinds to resources; Reset forgets cached discovery
	// (after CRDs were created).
	Mapper() meta.RESTMapper
	ResetMapper()
	// Clientset is the typed client, for the two-person rule's identity
	// (SelfSubjectReview) and apply gate (gate.Check).
	Clientset() kubernetes.Interface
}

type kubeCluster struct {
	access.Reviewer
	cs     kubernetes.Interface
	dyn    dynamic.Interface
	mapper meta.ResettableRESTMapper
}

// NewKubeCluster builds the real Cluster from a client configuration. The
// configuration's QPS and burst are used as given: callers raise them.
func NewKubeCluster(cfg *rest.Config) (Cluster, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &kubeCluster{Reviewer: access.NewReviewer(cs), cs: cs, dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}, nil
}

func (k *kubeCluster) KubeSystemUID(ctx context.Context) (string, error) {
	return kubeIdentity{k.cs}.KubeSystemUID(ctx)
}

func (k *kubeCluster) Clientset() kubernetes.Interface { return k.cs }

func (k *kubeCluster) Heads(ns string) cas.Client[*corev1.ConfigMap] {
	return k.cs.CoreV1().ConfigMaps(ns)
}

func (k *kubeCluster) ListPage(ctx context.Context, gvk schema.GroupVersionKind, ns string, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	ri, err := k.resource(gvk, ns)
	if err != nil {
		return nil, err
	}
	return ri.List(ctx, opts)
}

func (k *kubeCluster) resource(gvk schema.GroupVersionKind, ns string) (dynamic.ResourceInterface, error) {
	m, err := k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return k.dyn.Resource(m.Resource).Namespace(ns), nil
	}
	return k.dyn.Resource(m.Resource), nil
}

// objectResource is the dynamic client of id's resource, in its namespace.
func (k *kubeCluster) objectResource(id inventory.Identity) (dynamic.ResourceInterface, error) {
	gv, err := schema.ParseGroupVersion(id.APIVersion)
	if err != nil {
		return nil, err
	}
	return k.resource(gv.WithKind(id.Kind), id.Namespace)
}

func (k *kubeCluster) Apply(ctx context.Context, obj *unstructured.Unstructured, fieldManager string, force, dryRun bool) (*unstructured.Unstructured, error) {
	ri, err := k.resource(obj.GroupVersionKind(), obj.GetNamespace())
	if err != nil {
		return nil, err
	}
	body, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	opts := metav1.PatchOptions{FieldManager: fieldManager, Force: &force}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, opts)
}

func (k *kubeCluster) Get(ctx context.Context, id inventory.Identity) (*unstructured.Unstructured, error) {
	ri, err := k.objectResource(id)
	if err != nil {
		return nil, err
	}
	return ri.Get(ctx, id.Name, metav1.GetOptions{})
}

func (k *kubeCluster) Watch(ctx context.Context, id inventory.Identity, rv string) (watch.Interface, error) {
	ri, err := k.objectResource(id)
	if err != nil {
		return nil, err
	}
	return ri.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", id.Name).String(), ResourceVersion: rv})
}

func (k *kubeCluster) Delete(ctx context.Context, id inventory.Identity, opts metav1.DeleteOptions) error {
	ri, err := k.objectResource(id)
	if err != nil {
		return err
	}
	return ri.Delete(ctx, id.Name, opts)
}

func (k *kubeCluster) Mapper() meta.RESTMapper { return k.mapper }
func (k *kubeCluster) ResetMapper()            { k.mapper.Reset() }
