package inventory

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/qinglong/kubectl-ql3/third_party/kustomize-api/konfig"
	"github.com/qinglong/kubectl-ql3/third_party/kustomize-api/krusty"
	"github.com/qinglong/kubectl-ql3/third_party/kustomize-api/resmap"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// Options tune Render.
type Options struct {
	// Mapper resolves each kind's scope (namespaced or cluster-scoped). Nil
	// renders offline: a built-in table of Kubernetes kinds plus the
	// CustomResourceDefinitions in the render itself.
	Mapper meta.RESTMapper
	// AllowSecretData admits Secrets that carry data or stringData
	// (docs/lock.md, "Secrets").
	AllowSecretData bool
	// SecretDigestKey keys the HMAC-SHA256 that binds Secret values into the
	// render and source digests. Empty means Secret values are redacted and
	// not bound. It is never written anywhere.
	SecretDigestKey []byte
	// UnpinnedImages admits container images not pinned by digest; they are
	// left out of Release.Images. For audits that report such images as
	// findings of their own; never set it for a release that is locked.
	UnpinnedImages bool
	// Lean, for a caller that uses each object once, in turn: a release
	// LoadReleaseCached takes from the render cache keeps its objects as
	// Release.Lean (each the canonical JSON its render digest covered,
	// decoded when taken) instead of decoded in Release.Objects.
	Lean bool
}

// MinSecretDigestKeyLen is the shortest SecretDigestKey accepted, in bytes.
const MinSecretDigestKeyLen = 32

// Release is a rendered release directory.
type Release struct {
	// Dir is the release directory as given to Render.
	Dir string
	// Objects are the rendered objects in Inventory order, Secret values
	// included: these are what the ceremony applies. Never print or store
	// them; use RedactedObjects.
	Objects []*unstructured.Unstructured
	// Lean holds the objects instead of Objects (nil then) for a release
	// loaded from the render cache with Options.Lean; nil otherwise.
	Lean *LeanObjects
	// Inventory is the sorted, duplicate-free list of the objects' identities.
	Inventory []Identity
	// InventoryDigest, SourceDigest and RenderDigest are defined in
	// docs/digests.md.
	InventoryDigest, SourceDigest, RenderDigest string
	// Images is every container image of the render, sorted and unique; each
	// is pinned by digest.
	Images []string
	// ControlNamespace is the namespace of the workloads labelled
	// qinglong.io/role=control; empty if there are none.
	ControlNamespace string
	// Roles maps each qinglong.io/role label value found on a workload to
	// the workloads carrying it, sorted.
	Roles map[string][]Identity
	// Sources are the files the kustomization read, as the source digest
	// covers them, sorted by path.
	Sources []SourceFile
	// SecretValuesCovered is false when the render holds Secret values that
	// the digests do not bind (allowed Secret data without a key).
	SecretValuesCovered bool
	// Helm binds the Helm charts the release renders (docs/lock.md, "Helm
	// charts"); nil when it renders none.
	Helm *LockHelm

	redacted []*unstructured.Unstructured
}

// RedactedObjects are the objects exactly as the render digest covers them:
// like Objects, but each Secret value replaced by its keyed HMAC or by
// RedactedMarker. They are safe to print and store.
func (r *Release) RedactedObjects() []*unstructured.Unstructured { return r.redacted }

// TakeObjects returns Objects and lets the release forget its objects
// (Objects and RedactedObjects become nil; the digests, inventory and
// everything else stay), so that a caller that uses each object once can
// let each go: RedactedObjects shares every object without a Secret value
// with Objects and would otherwise hold them all to the end.
func (r *Release) TakeObjects() []*unstructured.Unstructured {
	objs := r.Objects
	r.Objects, r.redacted = nil, nil
	return objs
}

// Render builds the kustomization in dir on fsys with kustomize's default
// options (kubectl kustomize's behaviour), records every file it reads, and
// checks the result: identities, scope, images, roles and Secrets. All
// problems with the release are fail.Invalid.
func Render(fsys filesys.FileSystem, dir string, opts Options) (*Release, error) {
	if n := len(opts.SecretDigestKey); n > 0 && n < MinSecretDigestKeyLen {
		return nil, fail.Errorf(fail.Invalid, "secret digest key has %d bytes; need at least %d", n, MinSecretDigestKeyLen)
	}
	root, file, err := fsys.CleanedAbs(dir)
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "release %q: %w", dir, err)
	}
	if file != "" {
		return nil, fail.Errorf(fail.Invalid, "release %q is not a directory", dir)
	}
	if !slices.ContainsFunc(konfig.RecognizedKustomizationFileNames(), func(n string) bool { return fsys.Exists(root.Join(n)) }) {
		return nil, fail.Errorf(fail.Invalid, "release %q has no kustomization (want one of %q)", dir, konfig.RecognizedKustomizationFileNames())
	}

	rec := newRecorder(fsys, root)
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(rec, string(root))
	if rec.refused != nil {
		return nil, fail.Wrap(fail.Invalid, fmt.Errorf("release %q: %w", dir, rec.refused))
	}
	if err != nil {
		return nil, fail.Errorf(fail.Invalid, "release %q: kustomize: %w", dir, err)
	}
	objs, err := objects(m)
	if err != nil {
		return nil, fail.Wrap(fail.Invalid, fmt.Errorf("release %q: %w", dir, err))
	}
	files, err := rec.files()
	if err != nil {
		return nil, fail.Wrap(fail.Invalid, fmt.Errorf("release %q: %w", dir, err))
	}
	r, secrets, err := check(dir, objs, files, opts)
	if err != nil {
		return nil, err
	}
	if r.Sources, err = sourceFiles(files, secrets, opts.SecretDigestKey); err != nil {
		return nil, fail.Wrap(fail.Invalid, fmt.Errorf("release %q: %w", dir, err))
	}
	if r.SourceDigest, err = SourceDigest(r.Sources); err != nil {
		return nil, err
	}
	r.Helm = rec.helm
	if err := finishHelm(r.Helm, r.Sources); err != nil {
		return nil, fail.Wrap(fail.Invalid, fmt.Errorf("release %q: %w", dir, err))
	}
	if len(r.Images) == 0 {
		r.Images = []string{}
	}
	r.redacted, r.SecretValuesCovered, err = redact(r.Objects, secrets, opts.SecretDigestKey)
	if err != nil {
		return nil, err
	}
	if r.RenderDigest, err = RenderDigest(r.redacted); err != nil {
		return nil, fmt.Errorf("release %q: render digest: %w", dir, err)
	}
	if r.InventoryDigest, err = InventoryDigest(r.Inventory); err != nil {
		return nil, err
	}
	return r, nil
}

// RenderDigest is the digest of rendered objects in inventory order: the
// canonical JSON array of the objects under the "render" domain.
func RenderDigest(objs []*unstructured.Unstructured) (string, error) {
	return canon.DigestOfArray(DomainRender, items(objs))
}

// items are the objects' contents, as the render digest covers them.
func items(objs []*unstructured.Unstructured) []map[string]any {
	out := make([]map[string]any, len(objs))
	for i, o := range objs {
		out[i] = o.Object
	}
	return out
}

// RenderInput is the exact bytes the render digest hashes: the "render"
// domain's header, a zero byte and the canonical JSON array of the
// redacted objects (canon.DigestInput); its SHA-256 is the render digest's
// hex. It is the file an attestation's render subject names
// (docs/receipts.md §7.2).
func (r *Release) RenderInput() ([]byte, error) {
	return DigestInput(DomainRender, items(r.redacted))
}

// ObjectDigests are the objects' digests in inventory order: each the
// canonical JSON of one object, as the render digest covers it (Secret
// values keyed or redacted), under the "object" domain.
func (r *Release) ObjectDigests() ([]string, error) {
	out := make([]string, len(r.redacted))
	for i, o := range r.redacted {
		d, err := DigestOf(DomainObject, o.Object)
		if err != nil {
			return nil, fmt.Errorf("object %s: %w", r.Inventory[i], err)
		}
		out[i] = d
	}
	return out, nil
}

// ObjectInput is the exact bytes the i-th object's digest hashes (as
// RenderInput, for one object).
func (r *Release) ObjectInput(i int) ([]byte, error) {
	return DigestInput(DomainObject, r.redacted[i].Object)
}

// objects converts kustomize's resources to unstructured objects.
func objects(m resmap.ResMap) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, res := range m.Resources() {
		data, err := res.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("object %s: %w", res.CurId(), err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("object %s: %w", res.CurId(), err)
		}
		if u.IsList() {
			return nil, fmt.Errorf("object %s: lists are not supported", res.CurId())
		}
		out = append(out, u)
	}
	return out, nil
}

// check sorts the objects into inventory order and checks identities, scope,
// images, roles and Secrets; it returns the release without digests and the
// Secret values found. Every error is fail.Invalid unless the mapper failed.
func check(dir string, objs []*unstructured.Unstructured, files map[string][]byte, opts Options) (*Release, []secretValue, error) {
	entries, err := sortedEntries(dir, objs)
	if err != nil {
		return nil, nil, err
	}
	c := newChecker(dir, files, opts)
	for _, e := range entries {
		if err := c.scopes.addCRD(e.id, e.obj); err != nil {
			return nil, nil, fail.Wrap(fail.Invalid, fmt.Errorf("release %q: %w", dir, err))
		}
	}
	for i, e := range entries {
		if i > 0 && Compare(entries[i-1].id, e.id) == 0 {
			return nil, nil, fail.Errorf(fail.Invalid, "release %q: duplicate object %q", dir, e.id.String())
		}
		if err := c.object(e); err != nil {
			return nil, nil, err
		}
	}
	if err := c.finish(); err != nil {
		return nil, nil, err
	}
	return c.r, c.secrets, nil
}

// IdentityOf is object o's identity, as written in it.
func IdentityOf(o *unstructured.Unstructured) Identity {
	return Identity{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
}

type entry struct {
	id  Identity
	obj *unstructured.Unstructured
}

// sortedEntries puts the objects in inventory order; every object needs a
// name.
func sortedEntries(dir string, objs []*unstructured.Unstructured) ([]entry, error) {
	entries := make([]entry, 0, len(objs))
	for _, o := range objs {
		id := IdentityOf(o)
		if id.Name == "" {
			return nil, fail.Errorf(fail.Invalid, "release %q: %s %q has no metadata.name (generateName is not supported)", dir, id.Kind, o.GetGenerateName())
		}
		entries = append(entries, entry{id, o})
	}
	slices.SortStableFunc(entries, func(a, b entry) int { return Compare(a.id, b.id) })
	return entries, nil
}

// checker collects what check learns of each object, and the problems
// that are reported together.
type checker struct {
	dir           string
	files         map[string][]byte
	opts          Options
	scopes        *scoper
	r             *Release
	secrets       []secretValue
	seen          map[schema.GroupKind]map[[2]string]Identity
	errs          []error
	images        map[string]bool
	secretHolders []string
	lean          bool // the objects are not collected (leanRelease keeps their JSON)
}

func newChecker(dir string, files map[string][]byte, opts Options) *checker {
	return &checker{dir: dir, files: files, opts: opts, scopes: newScoper(opts.Mapper),
		r:    &Release{Dir: dir, Roles: map[string][]Identity{}},
		seen: map[schema.GroupKind]map[[2]string]Identity{}, images: map[string]bool{}}
}

// object checks one object: one apiVersion per object, not the Head, its
// scope, its images, its role and its Secret values.
func (c *checker) object(e entry) error {
	id := e.id
	gk := id.GroupKind()
	key := [2]string{id.Namespace, id.Name}
	if prev, ok := c.seen[gk][key]; ok {
		return fail.Errorf(fail.Invalid, "release %q: objects %q and %q are the same object under two apiVersions", c.dir, prev.String(), id.String())
	}
	if c.seen[gk] == nil {
		c.seen[gk] = map[[2]string]Identity{}
	}
	c.seen[gk][key] = id

	if IsHead(id) {
		c.errs = append(c.errs, fmt.Errorf("object %q%s: the name %q is reserved for the Head, in every namespace: a release never writes the Head; rename the ConfigMap (docs/lock.md)", id.String(), foundIn(c.files, HeadName), HeadName))
	}
	namespaced, err := c.scopes.namespaced(id)
	if err != nil {
		return fmt.Errorf("release %q: %w", c.dir, err)
	}
	switch {
	case namespaced && id.Namespace == "":
		c.errs = append(c.errs, fmt.Errorf("object %q is namespaced but has no metadata.namespace; set it in the manifest or with the kustomization's namespace field", id.String()))
	case !namespaced && id.Namespace != "":
		c.errs = append(c.errs, fmt.Errorf("object %q is cluster-scoped but has metadata.namespace %q", id.String(), id.Namespace))
	}

	imgs, imgErrs := podImages(id, e.obj, c.opts.UnpinnedImages, func(s string) string { return foundIn(c.files, s) })
	c.errs = append(c.errs, imgErrs...)
	for _, img := range imgs {
		c.images[img] = true
	}
	if role, ok := e.obj.GetLabels()[RoleLabel]; ok && isWorkload(gk) {
		c.r.Roles[role] = append(c.r.Roles[role], id)
	}
	vals, err := secretValuesOf(id, e.obj)
	if err != nil {
		c.errs = append(c.errs, err)
	}
	if len(vals) > 0 {
		c.secrets = append(c.secrets, vals...)
		c.secretHolders = append(c.secretHolders, id.String())
	}
	if !c.lean {
		c.r.Objects = append(c.r.Objects, e.obj)
	}
	c.r.Inventory = append(c.r.Inventory, id)
	return nil
}

// finish reports the collected problems together, then fills in the
// images and the unique control namespace.
func (c *checker) finish() error {
	if len(c.secretHolders) > 0 && !c.opts.AllowSecretData {
		what := fmt.Sprintf("Secret %q carries", c.secretHolders[0])
		if len(c.secretHolders) > 1 {
			what = fmt.Sprintf("Secrets %q carry", c.secretHolders)
		}
		c.errs = append(c.errs, fmt.Errorf("%s data; a locked release must not contain Secret values: create them out of band, or pass --allow-secret-data (docs/lock.md)", what))
	}
	if len(c.errs) > 0 {
		return fail.Wrap(fail.Invalid, joinErrors(fmt.Sprintf("release %q", c.dir), c.errs))
	}
	for img := range c.images {
		c.r.Images = append(c.r.Images, img)
	}
	slices.Sort(c.r.Images)
	for _, id := range c.r.Roles[RoleControl] {
		switch {
		case c.r.ControlNamespace == "":
			c.r.ControlNamespace = id.Namespace
		case c.r.ControlNamespace != id.Namespace:
			return fail.Errorf(fail.Invalid, "release %q: %s workloads are in namespaces %q and %q; the control namespace must be unique", c.dir, RoleControl, c.r.ControlNamespace, id.Namespace)
		}
	}
	return nil
}

// joinErrors reports every error, one per line after a heading; a single
// error stays on one line.
func joinErrors(heading string, errs []error) error {
	if len(errs) == 1 {
		return fmt.Errorf("%s: %w", heading, errs[0])
	}
	var b strings.Builder
	b.WriteString(heading)
	b.WriteString(":")
	for _, e := range errs {
		b.WriteString("\n  ")
		b.WriteString(e.Error())
	}
	return errors.New(b.String())
}

// foundIn names the source files that contain s as a whole token (not as
// the prefix of a longer image reference), as a hint for an error about s:
// " (in [\"a.yaml\"])", or "" if none does.
func foundIn(files map[string][]byte, s string) string {
	const refChar = `\w.:/@-` // characters of an image reference
	re := regexp.MustCompile(`(?m)(?:^|[^` + refChar + `])` + regexp.QuoteMeta(s) + `(?:$|[^` + refChar + `])`)
	var in []string
	for p, data := range files {
		if re.Match(data) {
			in = append(in, p)
		}
	}
	if len(in) == 0 {
		return ""
	}
	slices.Sort(in)
	return fmt.Sprintf(" (in %q)", in)
}

// relPath is path relative to root, slash-separated.
func relPath(root, path string) string {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return filepath.ToSlash(path)
	}
	return filepath.ToSlash(rel)
}
