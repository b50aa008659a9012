package inventory

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// ToolConstraint is the tool.constraint a lock written by toolVersion
// carries: at least toolVersion's minor release, below the next major, with
// pre-releases admitted (">=X.Y.0-0 <X+1.0.0-0").
func ToolConstraint(toolVersion string) (string, error) {
	v, err := semver.StrictNewVersion(strings.TrimPrefix(toolVersion, "v"))
	if err != nil {
		return "", fail.Errorf(fail.Invalid, "tool version %q is not SemVer: %w", toolVersion, err)
	}
	return fmt.Sprintf(">=%d.%d.0-0 <%d.0.0-0", v.Major(), v.Minor(), v.Major()+1), nil
}

// CheckToolConstraint checks the running plugin's version (a leading "v" is
// allowed) against the lock's tool.constraint; the error is fail.Invalid.
func CheckToolConstraint(l *Lock, version string) error {
	v, err := semver.StrictNewVersion(strings.TrimPrefix(version, "v"))
	if err != nil {
		return fail.Errorf(fail.Invalid, "plugin version %q is not SemVer: %w", version, err)
	}
	c, err := semver.NewConstraint(l.Tool.Constraint)
	if err != nil {
		return fail.Errorf(fail.Invalid, "lock tool.constraint %q: %w", l.Tool.Constraint, err)
	}
	if ok, errs := c.Validate(v); !ok {
		return fail.Errorf(fail.Invalid, "%s %s does not satisfy the lock's tool.constraint %q: %w%s", ToolName, version, l.Tool.Constraint, errors.Join(errs...), sourceBuildHint(v))
	}
	return nil
}

// sourceBuildHint explains a v0.0.0 version: a build from source that no
// release stamped (plugin's default v0.0.0-dev, or the pseudo-version the Go
// toolchain writes for a work tree). Such a build is never taken for a
// release; it is stamped explicitly (README, Install).
func sourceBuildHint(v *semver.Version) string {
	if v.Major() != 0 || v.Minor() != 0 || v.Patch() != 0 {
		return ""
	}
	return "; this is an unstamped build from source: build it with `make build` (stamps VERSION), or stamp the release it is with " +
		"go build -ldflags '-X github.com/qinglong/kubectl-ql3/plugin.version=vX.Y.Z' ./cmd/kubectl-ql3"
}

// NewLock binds release r as version for the cluster whose identity is
// clusterIdentity, written by plugin version toolVersion. The release must
// carry the production role surface.
func NewLock(r *Release, version, clusterIdentity, toolVersion string) (*Lock, error) {
	if err := r.CheckRoles(ProductionRoles()); err != nil {
		return nil, fail.Errorf(fail.Invalid, "release %q: %w", r.Dir, err)
	}
	if err := canon.CheckReleaseBounds(r.Inventory); err != nil {
		return nil, fail.Errorf(fail.Invalid, "release %q: %w", r.Dir, err)
	}
	constraint, err := ToolConstraint(toolVersion)
	if err != nil {
		return nil, err
	}
	l := &Lock{
		Schema:  LockSchema,
		Release: LockRelease{Version: version, Roles: ProductionRoles()},
		Target:  LockTarget{ClusterIdentity: clusterIdentity, Namespace: r.ControlNamespace},
		Tool:    LockTool{Name: ToolName, Constraint: constraint, FieldManager: FieldManager},
		Images:  slices.Clone(r.Images),
		Source:  LockSource{Digest: r.SourceDigest, Files: slices.Clone(r.Sources)},
		Render: LockRender{
			Digest:              r.RenderDigest,
			InventoryDigest:     r.InventoryDigest,
			Count:               len(r.Inventory),
			SecretValuesCovered: r.SecretValuesCovered,
			Inventory:           slices.Clone(r.Inventory),
		},
		Helm: r.Helm.clone(),
	}
	l = l.normalized()
	if errs := l.validate(); len(errs) > 0 {
		return nil, lockError(fmt.Sprintf("release %q cannot be locked", r.Dir), errs)
	}
	return l, nil
}

// VerifyLock checks that release r is what lock l binds. It returns nil, or
// a fail.Invalid *LockError listing every field that differs. The target
// cluster identity and the tool constraint are the ceremony's to check.
func VerifyLock(l *Lock, r *Release) error {
	var d []FieldError
	add := func(field, format string, args ...any) {
		d = append(d, FieldError{Field: field, Detail: fmt.Sprintf(format, args...)})
	}
	if err := r.CheckRoles(l.Release.Roles); err != nil {
		add("release.roles", "%v", err)
	}
	if l.Target.Namespace != r.ControlNamespace {
		add("target.namespace", "lock %q, release %q (the namespace of the %s workloads)", l.Target.Namespace, r.ControlNamespace, RoleControl)
	}
	for _, img := range missingStrings(l.Images, r.Images) {
		add("images", "%q is in the lock but no longer in the release", img)
	}
	for _, img := range missingStrings(r.Images, l.Images) {
		add("images", "%q is in the release but not in the lock", img)
	}
	verifySources(l, r, add)
	if l.Source.Digest != r.SourceDigest {
		add("source.digest", "lock %s, release %s", l.Source.Digest, r.SourceDigest)
	}

	// The lock binds the exact apiVersions: compared as identities, not by
	// Key, so a release that moved an object to another version differs.
	for _, id := range missingExact(l.Render.Inventory, r.Inventory) {
		add("render.inventory", "%q is in the lock but no longer in the release", id.String())
	}
	for _, id := range missingExact(r.Inventory, l.Render.Inventory) {
		add("render.inventory", "%q is in the release but not in the lock", id.String())
	}
	if l.Render.Count != len(r.Inventory) {
		add("render.count", "lock %d, release %d", l.Render.Count, len(r.Inventory))
	}
	if l.Render.InventoryDigest != r.InventoryDigest {
		add("render.inventoryDigest", "lock %s, release %s", l.Render.InventoryDigest, r.InventoryDigest)
	}
	if l.Render.SecretValuesCovered != r.SecretValuesCovered {
		hint := ""
		if l.Render.SecretValuesCovered {
			hint = "; the lock binds Secret values under a key: pass --secret-digest-key-file"
		}
		add("render.secretValuesCovered", "lock %t, release %t%s", l.Render.SecretValuesCovered, r.SecretValuesCovered, hint)
	}
	if l.Render.Digest != r.RenderDigest {
		add("render.digest", "lock %s, release %s", l.Render.Digest, r.RenderDigest)
	}
	if hd := verifyHelm(l.Helm, r.Helm); len(hd) > 0 {
		// The charts rendered otherwise than the lock binds: named first,
		// and a tamper-class refusal (docs/lock.md, "Helm charts").
		return fail.Wrap(fail.Tamper, &LockError{Summary: fmt.Sprintf("release %q does not match its lock: Helm charts differ", r.Dir), Fields: append(hd, d...)})
	}
	if len(d) > 0 {
		return lockError(fmt.Sprintf("release %q does not match its lock", r.Dir), d)
	}
	return nil
}

// verifySources names every source file the lock and the release do not
// agree on: absent from one of them, or with another digest.
func verifySources(l *Lock, r *Release, add func(field, format string, args ...any)) {
	lf, rf := map[string]string{}, map[string]string{}
	var paths []string
	for _, f := range l.Source.Files {
		lf[f.Path] = f.Digest
		paths = append(paths, f.Path)
	}
	for _, f := range r.Sources {
		rf[f.Path] = f.Digest
		if _, ok := lf[f.Path]; !ok {
			paths = append(paths, f.Path)
		}
	}
	slices.Sort(paths)
	for _, p := range paths {
		field := fmt.Sprintf("source.files[%q]", p)
		ld, inLock := lf[p]
		rd, inRelease := rf[p]
		switch {
		case !inRelease:
			add(field, "in the lock but no longer read by the kustomization")
		case !inLock:
			add(field, "read by the kustomization but not in the lock")
		case ld != rd:
			add(field, "changed: lock %s, release %s", ld, rd)
		}
	}
}

// missingExact returns the identities of a that b does not list with the
// same apiVersion, kind, namespace and name.
func missingExact(a, b []Identity) []Identity {
	in := make(map[Identity]bool, len(b))
	for _, id := range b {
		in[id] = true
	}
	var out []Identity
	for _, id := range a {
		if !in[id] {
			out = append(out, id)
		}
	}
	return out
}

// missingStrings returns the elements of sorted a absent from sorted b.
func missingStrings(a, b []string) []string {
	var out []string
	for _, s := range a {
		if _, ok := slices.BinarySearch(b, s); !ok {
			out = append(out, s)
		}
	}
	return out
}

// LoadRelease reads dir's lock, renders dir and verifies the one against
// the other: what the ceremony does first.
func LoadRelease(fsys filesys.FileSystem, dir string, opts Options) (*Release, *Lock, error) {
	l, err := ReadLock(fsys, dir)
	if err != nil {
		return nil, nil, err
	}
	r, err := Render(fsys, dir, opts)
	if err != nil {
		return nil, nil, err
	}
	if err := VerifyLock(l, r); err != nil {
		return nil, nil, err
	}
	return r, l, nil
}
