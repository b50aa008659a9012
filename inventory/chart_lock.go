package inventory

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// validateHelm checks the lock's helm section: every field, the order of
// the charts, and that each chart's digest and values digests agree with
// source.files (the section holds nothing source.files does not prove).
func (l *Lock) validateHelm(c *checks) {
	h := l.Helm
	if h == nil {
		return
	}
	c.required("helm.sdk", h.SDK)
	if len(h.Charts) == 0 {
		c.add("helm.charts", "required (omit helm when the release renders no chart)")
	}
	files := make(map[string]string, len(l.Source.Files))
	for _, f := range l.Source.Files {
		files[f.Path] = f.Digest
	}
	for i, ch := range h.Charts {
		field := fmt.Sprintf("helm.charts[%d]", i)
		if _, ok := files[ch.Kustomization]; !ok {
			c.add(field+".kustomization", "%q is not in source.files", ch.Kustomization)
		}
		for name, v := range map[string]string{"releaseName": ch.ReleaseName, "name": ch.Name, "version": ch.Version, "kubeVersion": ch.KubeVersion} {
			c.required(field+"."+name, v)
		}
		if msgs := dns1123Label(ch.Namespace); len(msgs) > 0 {
			c.add(field+".namespace", "%q is not a namespace name", ch.Namespace)
		}
		if !cleanRelPath(ch.Path) {
			c.add(field+".path", "%q is not a clean relative slash-separated path", ch.Path)
		}
		c.digest(field+".apiVersionsDigest", ch.APIVersionsDigest)
		if !slices.IsSorted(ch.APIVersions) || len(slices.Compact(slices.Clone(ch.APIVersions))) != len(ch.APIVersions) {
			c.add(field+".apiVersions", "not sorted and unique")
		}
		for j, v := range ch.Values {
			if d, ok := files[v.Path]; !ok || d != v.Digest {
				c.add(fmt.Sprintf("%s.values[%d]", field, j), "%q with %s is not a file of source.files with that digest", v.Path, v.Digest)
			}
		}
		if d, _ := ChartDigest(chartTree(l.Source.Files, ch.Path)); d != ch.Digest {
			c.add(field+".digest", "%q is not the digest of the source.files of %q (%s)", ch.Digest, ch.Path, d)
		}
		if i > 0 && chartKey(h.Charts[i-1]) >= chartKey(ch) {
			c.add(field, "out of order or repeated after %q", h.Charts[i-1].label())
		}
	}
}

// chartKey orders and matches the charts of a helm section.
func chartKey(c LockChart) string {
	return c.Kustomization + "\x00" + c.ReleaseName + "\x00" + c.Path
}

// verifyHelm lists how the charts a release renders differ from those its
// lock binds, each field naming the chart.
func verifyHelm(l, r *LockHelm) []FieldError {
	var d []FieldError
	add := func(field, format string, args ...any) {
		d = append(d, FieldError{Field: field, Detail: fmt.Sprintf(format, args...)})
	}
	switch {
	case l == nil && r == nil:
		return nil
	case l == nil:
		add("helm", "the release renders Helm charts %q, the lock binds none; lock the release again", chartLabels(r))
		return d
	case r == nil:
		add("helm", "the lock binds Helm charts %q, the release renders none", chartLabels(l))
		return d
	}
	if l.SDK != r.SDK {
		add("helm.sdk", "lock %s, this plugin renders with %s; verify with the plugin the lock was written with, or lock again", l.SDK, r.SDK)
	}
	lc := map[string]LockChart{}
	for _, c := range l.Charts {
		lc[chartKey(c)] = c
	}
	seen := map[string]bool{}
	for _, rc := range r.Charts {
		k := chartKey(rc)
		seen[k] = true
		c, ok := lc[k]
		field := fmt.Sprintf("helm.charts[%q]", rc.label())
		if !ok {
			add(field, "rendered by the release (declared in %q) but not in the lock", rc.Kustomization)
			continue
		}
		diffChart(field, c, rc, add)
	}
	for _, c := range l.Charts {
		if !seen[chartKey(c)] {
			add(fmt.Sprintf("helm.charts[%q]", c.label()), "in the lock but no longer rendered by the release")
		}
	}
	return d
}

// diffChart reports each field in which two bindings of one chart differ.
func diffChart(field string, l, r LockChart, add func(field, format string, args ...any)) {
	for _, f := range []struct{ name, l, r string }{
		{"name", l.Name, r.Name}, {"version", l.Version, r.Version}, {"namespace", l.Namespace, r.Namespace},
		{"digest", l.Digest, r.Digest}, {"kubeVersion", l.KubeVersion, r.KubeVersion},
		{"apiVersions", strings.Join(l.APIVersions, " "), strings.Join(r.APIVersions, " ")},
		{"apiVersionsDigest", l.APIVersionsDigest, r.APIVersionsDigest},
	} {
		if f.l != f.r {
			add(field+"."+f.name, "changed: lock %q, release %q", f.l, f.r)
		}
	}
	if !slices.Equal(l.Values, r.Values) {
		add(field+".values", "changed: lock %v, release %v", l.Values, r.Values)
	}
}

func chartLabels(h *LockHelm) []string {
	var out []string
	for _, c := range h.Charts {
		out = append(out, c.label())
	}
	return out
}

// cacheSourceKey is what the render cache keys a release by: its source
// digest, and for a release with Helm charts that digest bound to the helm
// section, so that a hit proves the section as the fresh render wrote it
// (docs/render-cache.md, "Helm charts").
func cacheSourceKey(sourceDigest string, h *LockHelm) (string, error) {
	if h == nil {
		return sourceDigest, nil
	}
	return DigestOf(DomainRenderCacheHelm, map[string]any{"sourceDigest": sourceDigest, "helm": h})
}

// chartTreesListed reports whether every chart directory the lock binds
// holds exactly the files source.files lists under it: Helm reads every
// file of a chart directory, so a file added there changes the render
// though no listed file changed (the render cache re-hashes listed files
// only).
func chartTreesListed(fsys filesys.FileSystem, dir string, l *Lock) bool {
	if l.Helm == nil {
		return true
	}
	for _, c := range l.Helm.Charts {
		listed := map[string]bool{}
		for _, f := range l.Source.Files {
			if strings.HasPrefix(f.Path, c.Path+"/") || f.Path == c.Path {
				listed[f.Path] = true
			}
		}
		root := filepath.Join(dir, filepath.FromSlash(c.Path))
		n := 0
		err := fsys.Walk(root, func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return err
			}
			rel, err := filepath.Rel(dir, p)
			if err != nil || !listed[filepath.ToSlash(rel)] {
				return errUnlisted
			}
			n++
			return nil
		})
		if err != nil || n != len(listed) {
			return false
		}
	}
	return true
}

var errUnlisted = errors.New("a chart file the lock does not list")
