package deploy

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/qinglong/kubectl-ql3/ceremony/access"
	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
)

// The access check makes the ceremony fail closed on missing permissions.
// Before preflight's dry-run, and again before apply acquires the Head, it
// asks the API server whether the caller holds every permission the apply
// will use — get and update (and, with no Head yet, create) of the Head,
// get and patch of every object, create of every object that does not
// exist yet, list of pods (and replicasets) where the release has
// workloads whose rollout converge explains — and refuses (invalid input) when one is missing.
// Without it a deployer lacking, say, `get` on one object (the convergence read) or
// `update` on the Head (the commit of an install) applied the whole
// release and only then failed, leaving the Head applying: the reliability
// campaign found both (hack/reliability, least privilege).
//
// It costs one SelfSubjectRulesReview per namespace of the release,
// evaluated locally; only what those rules do not allow, and
// cluster-scoped objects (which a namespace's rules cannot answer), are
// asked one by one with a SelfSubjectAccessReview, the API server's
// authoritative answer — so an incomplete rules review (webhook
// authorizers) never refuses wrongly. Objects are read, to see whether they
// exist, only for kinds the caller may not create.
//
// What no review answers — RBAC's escalation checks: writing a Role needs
// every permission it grants (the printed role grants the release's Roles'
// rules, never `escalate`), a binding needs `bind` on its role unless the
// deployer holds the role's permissions — is asked by a server-side dry-run of
// the release's Roles and bindings: preflight dry-runs every object anyway,
// and apply does it here, since permissions can change between the two.
//
// It also notes which workloads the namespace's RBAC rules let the caller
// watch by name (Options.watchable): converge watches those to poll as soon
// as they change, and never tries a watch the rules do not show.

// rbacDryRun asks checkAccess to dry-run the release's Roles and bindings
// with this field manager.
type rbacDryRun struct {
	fieldManager string
	force        bool
}

// checkAccess refuses, before any write, a caller that lacks a permission
// the apply of objs into control namespace ns will use. headExists says
// whether the Head exists (else it is created); with dry, the release's
// Roles and bindings are dry-run for RBAC's escalation checks.
func (o *Options) checkAccess(ctx context.Context, objs []*unstructured.Unstructured, ns string, headExists bool, dry *rbacDryRun) error {
	list, err := o.accessObjects(objs)
	if err != nil {
		return err
	}
	c := &accessCheck{o: o, cache: access.NewFastReview(o.Cluster), dry: dry, watch: map[inventory.Identity]bool{}}
	var g errgroup.Group
	g.SetLimit(max(o.Parallelism, 1))
	needs := headNeeds(ns, headExists)
	for rns, kinds := range rolloutKinds(objs) {
		needs = append(needs, rolloutReadNeeds(rns, kinds)...)
	}
	for _, a := range needs {
		g.Go(func() error { c.review(ctx, a); return nil })
	}
	for _, ob := range list {
		g.Go(func() error { c.object(ctx, ob); return nil })
	}
	_ = g.Wait() // no goroutine returns an error: they are noted in c
	if c.firstErr != nil {
		// A review the API server did not answer fails closed (cas).
		return cas.Classify(cas.OpRead, "access check", c.firstErr)
	}
	if len(c.missing) > 0 || len(c.refused) > 0 {
		var s []string
		for _, a := range c.missing {
			s = append(s, a.String())
		}
		return access.MissingError(append(s, c.refused...), "`kubectl ql3 rbac DIR` prints the least privilege")
	}
	o.say("access: every permission the apply needs is held (%d objects)", len(list))
	o.watchable = c.watch
	return nil
}

// headNeeds are the permissions on the Head in control namespace ns: get
// and update, and create when it does not exist yet.
func headNeeds(ns string, headExists bool) []access.Access {
	needs := []access.Access{
		{Verb: "get", Resource: "configmaps", Namespace: ns, Name: HeadName},
		{Verb: "update", Resource: "configmaps", Namespace: ns, Name: HeadName},
	}
	if !headExists {
		needs = append(needs, access.Access{Verb: "create", Resource: "configmaps", Namespace: ns})
	}
	return needs
}

// accessObject is one object of the release with the resource its access
// is reviewed on; served says whether the API server serves its kind yet
// (else the release's own CRD defines it).
type accessObject struct {
	u                  *unstructured.Unstructured
	group, resource    string
	namespaced, served bool
}

// accessObjects resolves each object's resource. An object of a kind
// neither served nor defined by the release's CRDs is left out: the
// dry-run reports an unknown kind.
func (o *Options) accessObjects(objs []*unstructured.Unstructured) ([]accessObject, error) {
	crds := releaseCRDs(objs)
	var list []accessObject
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		ob := accessObject{u: u, group: gvk.Group}
		m, err := o.Cluster.Mapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		switch {
		case err == nil:
			ob.resource, ob.namespaced, ob.served = m.Resource.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, true
		case meta.IsNoMatchError(err):
			c, found := crds[gvk.GroupKind()]
			if !found {
				continue
			}
			ob.resource, ob.namespaced = c.plural, c.namespaced
		default:
			return nil, fail.Errorf(fail.Unavailable, "access check: resolve %s: %w", gvk, err)
		}
		list = append(list, ob)
	}
	return list, nil
}

// accessCheck gathers, from concurrent reviews, the permissions missing,
// the RBAC objects whose dry-run was refused, and the first review the
// API server did not answer.
type accessCheck struct {
	o     *Options
	cache *access.Review
	dry   *rbacDryRun

	mu       sync.Mutex
	watch    map[inventory.Identity]bool // workloads the rules let converge watch
	missing  []access.Access
	refused  []string // RBAC objects whose dry-run was forbidden
	firstErr error
}

func (c *accessCheck) note(a access.Access, allowed bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err != nil && c.firstErr == nil:
		c.firstErr = err
	case err == nil && !allowed:
		c.missing = append(c.missing, a)
	}
}

func (c *accessCheck) review(ctx context.Context, a access.Access) bool {
	allowed, err := c.cache.Allowed(ctx, a)
	c.note(a, allowed, err)
	return err == nil && allowed
}

// object reviews one object: get and patch; create of its kind, and if
// that is not allowed, whether the object exists already (then it is not
// needed); with a dry-run asked, the dry-run of an RBAC object.
func (c *accessCheck) object(ctx context.Context, ob accessObject) {
	objNS := ""
	if ob.namespaced {
		objNS = ob.u.GetNamespace()
	}
	at := func(verb string) access.Access {
		return access.Access{Verb: verb, Group: ob.group, Resource: ob.resource, Namespace: objNS, Name: ob.u.GetName()}
	}
	canGet := c.review(ctx, at("get"))
	c.review(ctx, at("patch"))
	create := at("create")
	create.Name = "" // create cannot be limited by name
	switch canCreate, err := c.cache.Allowed(ctx, create); {
	case err != nil:
		c.note(create, false, err)
	case !canCreate:
		if !c.checkCreate(ctx, ob, canGet, at("get"), create) {
			return
		}
	}
	if c.dry != nil && ob.group == rbacGroup {
		c.dryRunRBAC(ctx, ob.u)
	}
	if isWorkload(ob.u) && c.cache.RulesAllowed(ctx, at("watch")) {
		c.mu.Lock()
		c.watch[identityOf(ob.u)] = true
		c.mu.Unlock()
	}
}

// checkCreate notes create as missing unless the object exists already (read
// only when the caller may get it and its kind is served). It returns
// false when the read failed in a way that ends this object's review.
func (c *accessCheck) checkCreate(ctx context.Context, ob accessObject, canGet bool, get, create access.Access) bool {
	exists := false
	if canGet && ob.served {
		_, err := c.o.Cluster.Get(ctx, identityOf(ob.u))
		switch {
		case err == nil:
			exists = true
		case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		case apierrors.IsForbidden(err):
			c.note(get, false, nil)
		default:
			c.note(create, false, err)
			return false
		}
	}
	if !exists {
		c.note(create, false, nil)
	}
	return true
}

// dryRunRBAC dry-runs a Role or binding for RBAC's escalation checks and
// records a refusal; any other failure is the apply's to report.
func (c *accessCheck) dryRunRBAC(ctx context.Context, u *unstructured.Unstructured) {
	_, err := c.o.Cluster.Apply(ctx, u, c.dry.fieldManager, c.dry.force, true)
	if apierrors.IsForbidden(err) || (isBinding(u) && roleNotFound(err)) {
		// A binding whose role does not exist yet is only allowed with
		// `bind`: without it the API server looks the role up to compare
		// permissions, finds none and says NotFound now, Forbidden once the
		// release has created the role (after other objects were written).
		c.mu.Lock()
		c.refused = append(c.refused, fmt.Sprintf("%s: %v", identityOf(u), err))
		c.mu.Unlock()
	}
}

const rbacGroup = "rbac.authorization.k8s.io"

func isBinding(u *unstructured.Unstructured) bool {
	return u.GetKind() == "RoleBinding" || u.GetKind() == "ClusterRoleBinding"
}

// roleNotFound reports the NotFound a binding's dry-run gets when its role
// is looked up and does not exist (server-side apply creates the binding
// itself, so only its role, or its namespace, can be missing).
func roleNotFound(err error) bool {
	var st apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &st) {
		return false
	}
	d := st.Status().Details
	return d == nil || d.Kind != "namespaces"
}

type crdInfo struct {
	plural     string
	namespaced bool
}

// releaseCRDs are the kinds the release's own CRDs define.
func releaseCRDs(objs []*unstructured.Unstructured) map[schema.GroupKind]crdInfo {
	out := map[schema.GroupKind]crdInfo{}
	for _, u := range objs {
		if gvk := u.GroupVersionKind(); gvk.Group != crdGroup || gvk.Kind != "CustomResourceDefinition" {
			continue
		}
		g, _, _ := unstructured.NestedString(u.Object, "spec", "group")
		k, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
		p, _, _ := unstructured.NestedString(u.Object, "spec", "names", "plural")
		s, _, _ := unstructured.NestedString(u.Object, "spec", "scope")
		out[schema.GroupKind{Group: g, Kind: k}] = crdInfo{plural: p, namespaced: s == "Namespaced"}
	}
	return out
}
