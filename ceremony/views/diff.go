package views

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/pmezard/go-difflib/difflib"
	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/ceremony/cas"
	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
	"github.com/qinglong/kubectl-ql3/inventory/rendercache"
)

// DiffSchema names the structured change list.
const DiffSchema = "qinglong/diff@v1"

// DomainDiff is the digest domain of the change list (docs/head.md,
// "diffDigest").
const DomainDiff = "diff"

// Changes of one object.
const (
	Created   = "created"
	Changed   = "changed"
	Unchanged = "unchanged"
)

// Secret value markers: a Secret's data and stringData values are replaced
// by these before anything is compared or printed.
const (
	ValueMasked  = "(value)"
	ValueChanged = "(value changed)"
)

// LastApplied is the annotation kubectl apply writes; it is removed like
// kubectl diff removes it (it may hold a copy of every value).
const LastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// ObjectChange is one object's entry in the change list.
type ObjectChange struct {
	Object inventory.Identity `json:"object"`
	Change string             `json:"change"`
	// Note says why the "after" side is the rendered object, not the
	// dry-run result: the object's namespace or CRD comes with the release.
	Note string `json:"note,omitempty"`
	// Diff is the unified diff of the masked, normalised live object
	// ("live/...") and dry-run result ("dry-run/..."); empty when unchanged.
	// Of a spooled report, empty in Objects: DiffReport.Each reads it back.
	Diff string `json:"diff,omitempty"`
	// spooled is where Diff stands in the report's spool; nil: in Diff.
	spooled *span
}

// WouldRetire is an object the Head deploys and the release no longer
// contains: the only transition that can apply the release, retire,
// deletes it. UID and ResourceVersion are as preflight records them (the
// object read now); both empty when it is already absent.
type WouldRetire struct {
	Object          inventory.Identity `json:"object"`
	UID             string             `json:"uid,omitempty"`
	ResourceVersion string             `json:"resourceVersion,omitempty"`
}

// DiffReport is the structured change list of `kubectl ql3 diff`.
type DiffReport struct {
	Schema    string         `json:"schema"`
	Namespace string         `json:"namespace"`
	Version   string         `json:"version"`
	Created   int            `json:"created"`
	Changed   int            `json:"changed"`
	Unchanged int            `json:"unchanged"`
	Objects   []ObjectChange `json:"objects"`
	// Retire lists, when the namespace has a Head, the objects it deploys
	// that the release no longer contains (sorted). Not part of Digest:
	// a retire's preflight record binds them itself, with these UIDs and
	// resourceVersions.
	Retire []WouldRetire `json:"retire,omitempty"`
	// Digest is the diff digest: DigestOf("diff", {schema, objects}).
	Digest string `json:"digest"`
	// Render says whether DiffRelease took the objects from the render
	// cache (progress only; not part of the report).
	Render inventory.CacheUse `json:"-"`
	// texts holds the diff texts of a spooled report (DiffRequest.Spool).
	texts *textSpool
}

// HasChanges reports whether any object would be created, changed or
// retired.
func (r *DiffReport) HasChanges() bool { return r.Created+r.Changed+len(r.Retire) > 0 }

// DiffDigest is the digest of the change list: the canonical JSON of
// {"schema": DiffSchema, "objects": objects} under the "diff" domain.
func DiffDigest(objects []ObjectChange) (string, error) {
	return canon.DigestOfMemberArray(DomainDiff, map[string]any{"schema": DiffSchema}, "objects", objects)
}

// Differ is what Diff needs of the cluster: an exact GET and a server-side
// apply, here only ever with dryRun. deploy.Cluster satisfies it.
type Differ interface {
	Apply(ctx context.Context, obj *unstructured.Unstructured, fieldManager string, force, dryRun bool) (*unstructured.Unstructured, error)
	Get(ctx context.Context, id inventory.Identity) (*unstructured.Unstructured, error)
}

// DiffRequest is one diff of a rendered release against the cluster.
type DiffRequest struct {
	Objects        []*unstructured.Unstructured // the release's objects (values included)
	Namespace      string                       // the lock's target namespace
	Version        string                       // the release version
	FieldManager   string                       // the lock's field manager
	ForceConflicts bool
	Parallelism    int // GET + dry-run pairs in flight (default 16)
	// DryRun, when not nil, holds each object as a server-side apply
	// dry-run with the same field manager and force already answered it,
	// aligned with Objects (preflight --diff passes its own dry-run's);
	// a nil element is an object that could not be dry-run yet. Only the
	// live objects are then read.
	DryRun []*unstructured.Unstructured
	// DropObjects lets Diff set each element of Objects to nil once that
	// object is compared, so that a large release's objects are not held
	// beside its diffs (the caller has no further use for them).
	DropObjects bool
	// Lean, when Objects is nil, holds the release's objects instead:
	// each is read and decoded when it is compared.
	Lean *inventory.LeanObjects
	// Spool keeps the diff texts in a temporary file until they are
	// printed (DiffReport.Each, WriteJSON; Close lets the file go), not in
	// memory. Without a usable temporary directory they stay in memory.
	Spool bool
}

// count is the number of the request's objects.
func (req *DiffRequest) count() int {
	if req.Objects == nil && req.Lean != nil {
		return req.Lean.Len()
	}
	return len(req.Objects)
}

// take is object i, for its one comparison.
func (req *DiffRequest) take(i int) (*unstructured.Unstructured, error) {
	if req.Objects == nil && req.Lean != nil {
		return req.Lean.Object(i)
	}
	u := req.Objects[i]
	if req.DropObjects {
		req.Objects[i] = nil // each goroutine its own element
	}
	return u, nil
}

// defined is what the release itself creates: its Namespaces, and the
// group/kind of each of its CustomResourceDefinitions (of a lean release,
// only those are decoded).
func (req *DiffRequest) defined() (namespaces, kinds map[string]bool, err error) {
	namespaces, kinds = map[string]bool{}, map[string]bool{}
	for i := range req.count() {
		var u *unstructured.Unstructured
		if req.Objects == nil && req.Lean != nil {
			gk := req.Lean.ID(i).GroupKind()
			if gk != (schema.GroupKind{Kind: "Namespace"}) && gk != (schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}) {
				continue
			}
			if u, err = req.Lean.Object(i); err != nil {
				return nil, nil, err
			}
		} else {
			u = req.Objects[i]
		}
		switch gvk := u.GroupVersionKind(); gvk.GroupKind() {
		case schema.GroupKind{Kind: "Namespace"}:
			namespaces[u.GetName()] = true
		case schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:
			g, _, _ := unstructured.NestedString(u.Object, "spec", "group")
			k, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
			kinds[g+"/"+k] = true
		}
	}
	return namespaces, kinds, nil
}

// Diff computes the change list: for each object a GET (404: created) and
// the same server-side apply dry-run preflight makes; both sides are
// normalised and Secret-masked, then compared. Objects whose namespace or
// CRD the release itself creates cannot be dry-run yet: they are created,
// compared against the rendered object, with a note. Per-object failures
// are returned together, classified.
func Diff(ctx context.Context, c Differ, req DiffRequest) (*DiffReport, error) {
	n := req.Parallelism
	if n <= 0 {
		n = 16
	}
	releaseNS, kinds, err := req.defined()
	if err != nil {
		return nil, fail.Wrap(fail.ClassOf(err), err) // an object changed in the cache entry stays unavailable
	}
	total := req.count()
	out := make([]ObjectChange, total)
	errs := make([]error, total)
	var spool *textSpool
	if req.Spool {
		spool = newTextSpool()
	}
	var g errgroup.Group
	g.SetLimit(n)
	for i := range total {
		g.Go(func() error {
			var dry *unstructured.Unstructured
			if req.DryRun != nil {
				dry = req.DryRun[i]
			}
			u, err := req.take(i)
			if err != nil {
				out[i].Object, errs[i] = req.Lean.ID(i), err
				return nil
			}
			out[i], errs[i] = diffOne(ctx, c, req, u, dry, releaseNS, kinds)
			if req.Lean != nil && req.Lean.ID(i) == out[i].Object {
				out[i].Object = req.Lean.ID(i) // the inventory's strings, not a second copy of them
			}
			if errs[i] == nil && spool != nil && out[i].Diff != "" {
				if out[i].spooled, errs[i] = spool.put(out[i].Diff); errs[i] == nil {
					out[i].Diff = ""
				}
			}
			return nil
		})
	}
	_ = g.Wait() // every object's error is kept in errs, all reported below
	rep := &DiffReport{Schema: DiffSchema, Namespace: req.Namespace, Version: req.Version, Objects: out, texts: spool}
	if err := compared(out, errs); err != nil {
		_ = rep.Close()
		return nil, err
	}
	slices.SortFunc(out, func(a, b ObjectChange) int { return inventory.Compare(a.Object, b.Object) })
	for _, o := range out {
		switch o.Change {
		case Created:
			rep.Created++
		case Changed:
			rep.Changed++
		default:
			rep.Unchanged++
		}
	}
	if rep.Digest, err = rep.digest(); err != nil {
		_ = rep.Close()
		return nil, err
	}
	return rep, nil
}

// compared is nil when every object was compared, or every failure,
// classified.
func compared(out []ObjectChange, errs []error) error {
	var failed []error
	for i, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", out[i].Object, err))
		}
	}
	if len(failed) == 0 {
		return nil
	}
	class := cas.Decisive(cas.OpApply, "diff", failed)
	hint := ""
	if class == fail.Conflict {
		hint = "; another field manager owns these fields: diff again with --force-conflicts to see them taken over"
	}
	return fail.Errorf(class, "diff: %d of %d objects could not be compared (nothing was written%s): %v", len(failed), len(out), hint, failed)
}

func diffOne(ctx context.Context, c Differ, req DiffRequest, u, dry *unstructured.Unstructured, releaseNS, kinds map[string]bool) (ObjectChange, error) {
	id := inventory.Identity{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
	ch := ObjectChange{Object: id}
	live, err := c.Get(ctx, id)
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case meta.IsNoMatchError(err) && kinds[u.GroupVersionKind().Group+"/"+id.Kind]:
		// The kind comes with this release's CRD and is not served yet:
		// the object cannot exist either.
		live = nil
	case err != nil:
		return ch, err
	}
	after := dry
	if after == nil {
		// No dry-run given, or preflight's was deferred (then this one
		// is too, unless the namespace or CRD appeared meanwhile).
		var err error
		if after, err = c.Apply(ctx, u, req.FieldManager, req.ForceConflicts, true); err != nil {
			notYet := meta.IsNoMatchError(err) || apierrors.IsNotFound(err)
			if live == nil && notYet && (releaseNS[id.Namespace] || kinds[u.GroupVersionKind().Group+"/"+id.Kind]) {
				after = u
				ch.Note = "rendered object: its namespace or CRD is created by this release, so it cannot be dry-run yet"
			} else {
				return ch, err
			}
		}
	}
	var liveObj map[string]any
	if live != nil {
		liveObj = live.Object
	}
	before, afterM := Mask(id, Normalize(liveObj), Normalize(after.Object))
	text, err := UnifiedDiff(id, before, afterM)
	if err != nil {
		return ch, err
	}
	switch {
	case live == nil:
		ch.Change = Created
	case text == "":
		ch.Change = Unchanged
	default:
		ch.Change = Changed
	}
	ch.Diff = text
	return ch, nil
}

// Normalize returns a deep copy of obj without what the API server
// populates and kubectl diff removes: metadata.managedFields,
// resourceVersion, generation, creationTimestamp, uid, selfLink, the
// last-applied annotation (metadata.annotations removed when that leaves
// it empty), and status. nil stays nil.
func Normalize(obj map[string]any) map[string]any {
	if obj == nil {
		return nil
	}
	out := runtimeDeepCopy(obj)
	delete(out, "status")
	if md, ok := out["metadata"].(map[string]any); ok {
		for _, k := range []string{"managedFields", "resourceVersion", "generation", "creationTimestamp", "uid", "selfLink"} {
			delete(md, k)
		}
		if ann, ok := md["annotations"].(map[string]any); ok {
			delete(ann, LastApplied)
			if len(ann) == 0 {
				delete(md, "annotations")
			}
		}
	}
	return out
}

func runtimeDeepCopy(obj map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: obj}).DeepCopy().Object
}

// Mask replaces every value of a Secret's data and stringData (in both
// sides; either may be nil) by ValueMasked, except that a key present on
// both sides whose value differs gets ValueChanged on the "after" side.
// Objects that are not v1 Secrets are returned as they are. The inputs
// are not modified.
func Mask(id inventory.Identity, before, after map[string]any) (map[string]any, map[string]any) {
	if id.APIVersion != "v1" || id.Kind != "Secret" {
		return before, after
	}
	if before != nil {
		before = runtimeDeepCopy(before)
	}
	if after != nil {
		after = runtimeDeepCopy(after)
	}
	for _, field := range []string{"data", "stringData"} {
		var b, a map[string]any
		if before != nil {
			b, _ = before[field].(map[string]any)
			maskAll(before, field)
		}
		if after != nil {
			a, _ = after[field].(map[string]any)
			maskAll(after, field)
		}
		if a == nil || b == nil {
			continue
		}
		am := after[field].(map[string]any)
		for k, av := range a {
			if bv, ok := b[k]; ok && fmt.Sprint(bv) != fmt.Sprint(av) {
				am[k] = ValueChanged
			}
		}
	}
	return before, after
}

// maskAll replaces obj[field] by a map of the same keys, every value
// ValueMasked; a field that is not a map is replaced by ValueMasked.
func maskAll(obj map[string]any, field string) {
	raw, ok := obj[field]
	if !ok {
		return
	}
	m, ok := raw.(map[string]any)
	if !ok {
		obj[field] = ValueMasked
		return
	}
	masked := make(map[string]any, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		masked[k] = ValueMasked
	}
	obj[field] = masked
}

// UnifiedDiff is the unified diff (3 lines of context) of the YAML of
// before ("live/<identity>") and after ("dry-run/<identity>"); "" when they
// are equal. A nil side is empty.
func UnifiedDiff(id inventory.Identity, before, after map[string]any) (string, error) {
	return unifiedDiff(id, before, after, "live/", "dry-run/")
}

// unifiedDiff is UnifiedDiff with the headers' prefixes from and to.
func unifiedDiff(id inventory.Identity, before, after map[string]any, from, to string) (string, error) {
	a, err := toYAML(before)
	if err != nil {
		return "", err
	}
	b, err := toYAML(after)
	if err != nil {
		return "", err
	}
	if a == b {
		return "", nil
	}
	return difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(a), B: difflib.SplitLines(b),
		FromFile: from + id.String(), ToFile: to + id.String(), Context: 3,
	})
}

func toYAML(obj map[string]any) (string, error) {
	if obj == nil {
		return "", nil
	}
	out, err := yaml.Marshal(obj)
	return string(out), err
}

// The ceremony's cluster is a Differ: preflight --diff and kubectl ql3
// diff read through the same client as the dry-run step.
var _ Differ = deploy.Cluster(nil)

// DiffRelease renders the release directory dir (or takes its render
// from cache, exactly as preflight does: docs/render-cache.md; nil cache:
// always render), verifies it against its lock, checks that c is the lock's cluster (a wrong --context is invalid
// input, as in preflight) and diffs it. The lock's field manager is used.
// When the lock's namespace has a Head (read and validated as every
// command does: a tampered one is tamper), the objects it deploys that the
// release does not contain are listed in Retire. The report is spooled
// (DiffRequest.Spool): the caller prints it and Closes it.
func DiffRelease(ctx context.Context, c deploy.Cluster, fsys filesys.FileSystem, dir string, opts inventory.Options, cache *rendercache.Cache, force bool, parallelism int) (*DiffReport, error) {
	opts.Mapper, opts.Lean = c.Mapper(), true // each object is compared once: a cache hit keeps them lean
	rel, lock, use, err := inventory.LoadReleaseCached(fsys, dir, opts, cache)
	if err != nil {
		return nil, err
	}
	if rel.Lean != nil {
		defer rel.Lean.Close()
	}
	// The lock's inventory is the release's (LoadReleaseCached verified
	// it); only its target, version and field manager are read below.
	lock.Render.Inventory = nil
	id, err := deploy.ReadClusterIdentity(ctx, c)
	if err != nil {
		return nil, err
	}
	if id != lock.Target.ClusterIdentity {
		return nil, fail.Errorf(fail.Invalid, "cluster identity %s does not match the lock's target.clusterIdentity %s: wrong --context?", id, lock.Target.ClusterIdentity)
	}
	rep, err := Diff(ctx, c, DiffRequest{
		Objects: rel.TakeObjects(), Lean: rel.Lean, Namespace: lock.Target.Namespace, Version: lock.Release.Version,
		FieldManager: lock.Tool.FieldManager, ForceConflicts: force, Parallelism: parallelism,
		DropObjects: true, // only rel.Inventory is read below
		Spool:       true, // the caller prints the texts once, in order
	})
	if err != nil {
		return nil, err
	}
	rep.Render = use
	h, err := deploy.ReadHead(ctx, c, lock.Target.Namespace)
	if err == nil && h != nil {
		rep.Retire, err = WouldBeRetired(ctx, c, inventory.Missing(h.Current.Inventory, rel.Inventory))
	}
	if err != nil {
		_ = rep.Close()
		return nil, err
	}
	return rep, nil
}

// WouldBeRetired reads each of ids (GET) as a retire's preflight records
// it: UID and resourceVersion, or neither when the object or its kind is
// gone (404, or the kind no longer served). Any other failure is returned,
// classified: an object that could not be read is never called absent.
func WouldBeRetired(ctx context.Context, c Differ, ids []inventory.Identity) ([]WouldRetire, error) {
	out := make([]WouldRetire, 0, len(ids))
	for _, id := range ids {
		w := WouldRetire{Object: id}
		u, err := c.Get(ctx, id)
		switch {
		case err == nil:
			w.UID, w.ResourceVersion = string(u.GetUID()), u.GetResourceVersion()
		case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		default:
			return nil, cas.Classify(cas.OpRead, "diff: read "+id.String(), err)
		}
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b WouldRetire) int { return inventory.Compare(a.Object, b.Object) })
	return out, nil
}
