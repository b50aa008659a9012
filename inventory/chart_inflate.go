package inventory

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/qinglong/kubectl-ql3/third_party/kustomize-api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// ChartResource is the name of the resource the recorder adds to a
// kustomization that declares helmCharts: kustomize reads the rendered
// charts from it, so every transformer of the kustomization applies to
// them as to kustomize's own Helm generator's output. It exists only in
// memory; a release file of that name is refused.
const ChartResource = ".ql3-helm-charts.yaml"

// inflate renders the helmCharts of the kustomization rel (in the resolved
// directory dir) in-process and returns the kustomization as kustomize must
// see it: without helmCharts and helmGlobals, with ChartResource added to
// its resources. A kustomization without helmCharts is returned unchanged.
func (r *recorder) inflate(dir, rel string, data []byte) ([]byte, error) {
	var k types.Kustomization
	if err := k.Unmarshal(data); err != nil || len(k.HelmCharts) == 0 {
		return data, nil // kustomize reports a bad kustomization
	}
	cr := currentChartRenderer()
	home := types.HelmDefaultHome
	if g := k.HelmGlobals; g != nil {
		if g.ConfigHome != "" {
			return nil, fmt.Errorf("kustomization %q: helmGlobals.configHome is for the helm binary, which a locked release never runs; remove it", rel)
		}
		if g.ChartHome != "" {
			home = g.ChartHome
		}
	}
	var stream strings.Builder
	for i, h := range k.HelmCharts {
		docs, c, err := r.renderChart(cr, dir, rel, fmt.Sprintf("kustomization %q: helmCharts[%d]", rel, i), h, home, k.Namespace)
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			fmt.Fprintf(&stream, "---\n# Source: %s\n%s\n", d.Source, d.YAML)
		}
		r.mu.Lock()
		if r.helm == nil {
			r.helm = &LockHelm{SDK: cr.SDKVersion()}
		}
		r.helm.Charts = append(r.helm.Charts, c)
		r.mu.Unlock()
	}
	virt := filepath.Join(dir, ChartResource)
	if r.FileSystem.Exists(virt) {
		return nil, fmt.Errorf("kustomization %q: the file name %q is reserved for the rendered Helm charts; rename the file", rel, ChartResource)
	}
	k.HelmCharts, k.HelmGlobals = nil, nil
	if strings.TrimSpace(stream.String()) != "" {
		r.mu.Lock()
		r.virtual[virt] = []byte(stream.String())
		r.mu.Unlock()
		k.Resources = append(k.Resources, ChartResource)
	}
	out, err := yaml.Marshal(&k)
	if err != nil {
		return nil, fmt.Errorf("kustomization %q: %w", rel, err)
	}
	return out, nil
}

// pullHint is the command that vendors chart h into the release.
func pullHint(h types.HelmChart, home string) string {
	ref := h.Name
	if h.Repo != "" && !strings.HasPrefix(h.Repo, "oci://") {
		ref += " --repo " + h.Repo
	} else if h.Repo != "" {
		ref = strings.TrimSuffix(h.Repo, "/") + "/" + h.Name
	}
	if h.Version != "" {
		ref += " --version " + h.Version
	}
	hint := fmt.Sprintf("helm pull %s --untar --untardir %s", ref, home)
	if h.Repo != "" || strings.Contains(h.Name, "://") {
		hint += ", then name the chart by its directory and remove repo"
	}
	return hint
}

// checkEntry refuses a helmCharts entry that fetches, names its chart
// ambiguously, or lets Helm choose what the lock must fix.
func checkEntry(where string, h types.HelmChart, home string) error {
	switch {
	case h.Name == "":
		return fmt.Errorf("%s: name is required", where)
	case h.Repo != "" || isRemote(h.Name) || strings.HasPrefix(h.Name, "oci://"):
		return fmt.Errorf("%s: chart %q is fetched from a repository; a locked release renders only charts vendored in its tree: vendor it with %s", where, h.Name, pullHint(h, home))
	case strings.Count(h.Name, "/") == 1 && !strings.HasPrefix(h.Name, "/") && !strings.HasPrefix(h.Name, "."):
		// REPO/CHART, as helm names a chart of an added repository.
		return fmt.Errorf("%s: chart %q names a chart of a Helm repository; a locked release renders only charts vendored in its tree: vendor it with %s, then name it %q", where, h.Name, pullHint(h, home), path.Base(h.Name))
	case strings.ContainsAny(h.Name, `/\`) || h.Name == "." || h.Name == "..":
		return fmt.Errorf("%s: name %q must be the chart's directory name under %s/", where, h.Name, home)
	case h.ReleaseName == "":
		return fmt.Errorf("%s: releaseName is required (helm would generate a random one)", where)
	case h.NameTemplate != "":
		return fmt.Errorf("%s: nameTemplate is not supported; set releaseName", where)
	case h.ValuesMerge != "" && h.ValuesMerge != "override":
		return fmt.Errorf("%s: valuesMerge %q is not supported; only override (the default)", where, h.ValuesMerge)
	}
	return nil
}

// renderChart checks one helmCharts entry, reads its chart and values
// (recording them as source files), renders it twice and returns the
// documents and the chart's lock entry (without digests: finishHelm).
func (r *recorder) renderChart(cr ChartRenderer, dir, rel, where string, h types.HelmChart, home, kustNS string) ([]ChartDoc, LockChart, error) {
	var c LockChart
	if err := checkEntry(where, h, home); err != nil {
		return nil, c, err
	}
	if cr == nil {
		return nil, c, fmt.Errorf("%s: this build renders no Helm charts", where)
	}
	ns := h.Namespace
	if ns == "" {
		ns = kustNS
	}
	if ns == "" {
		return nil, c, fmt.Errorf("%s: namespace is required (or the kustomization's namespace field)", where)
	}
	chartDir := filepath.Join(dir, filepath.FromSlash(home), h.Name)
	if !inside(dir, chartDir) || isRemote(home) {
		return nil, c, fmt.Errorf("%s: chartHome %q leaves the kustomization's directory", where, home)
	}
	files, archive, chartPath, err := r.readChartOrArchive(chartDir, h)
	if err != nil {
		return nil, c, fmt.Errorf("%s: %w", where, err)
	}
	if chartPath == "" {
		var archives []string
		for _, a := range archiveNames(h) {
			archives = append(archives, path2(home, a))
		}
		return nil, c, fmt.Errorf("%s: neither the chart directory %q nor a chart archive %q exists; vendor the chart with %s", where, path2(home, h.Name), archives, pullHint(h, home))
	}
	req := ChartRequest{Files: files, Archive: archive, Inline: h.ValuesInline, InlineAfterFirst: h.ValuesFile != "",
		ReleaseName: h.ReleaseName, Namespace: ns, KubeVersion: h.KubeVersion, APIVersions: slices.Clone(h.ApiVersions),
		IncludeCRDs: h.IncludeCRDs, SkipHooks: h.SkipHooks}
	if req.KubeVersion == "" {
		req.KubeVersion = cr.DefaultKubeVersion()
	}
	slices.Sort(req.APIVersions)
	req.APIVersions = slices.Compact(req.APIVersions)
	if req.Values, err = r.readAllValues(dir, where, h); err != nil {
		return nil, c, err
	}
	r.mu.Lock()
	req.Path = r.name(chartPath)
	r.mu.Unlock()
	out, err := renderTwice(cr, req, where)
	if err != nil {
		return nil, c, err
	}
	if h.Version != "" && h.Version != out.Version {
		return nil, c, fmt.Errorf("%s: version %q, but the Chart.yaml of %s says %q", where, h.Version, req.Path, out.Version)
	}
	apiDigest, err := APIVersionsDigest(out.APIVersions)
	if err != nil {
		return nil, c, err
	}
	c = LockChart{Kustomization: rel, ReleaseName: h.ReleaseName, Namespace: ns, Name: out.Name, Version: out.Version,
		Path: req.Path, KubeVersion: req.KubeVersion, APIVersions: req.APIVersions, APIVersionsDigest: apiDigest}
	if c.APIVersions == nil {
		c.APIVersions = []string{}
	}
	for _, v := range req.Values {
		c.Values = append(c.Values, SourceFile{Path: v.Path})
	}
	if c.Values == nil {
		c.Values = []SourceFile{}
	}
	return out.Docs, c, nil
}

// readAllValues reads the entry's valuesFile and additionalValuesFiles, in
// the order they apply.
func (r *recorder) readAllValues(dir, where string, h types.HelmChart) ([]ChartFile, error) {
	var values []string
	if h.ValuesFile != "" {
		values = append(values, h.ValuesFile)
	}
	values = append(values, h.AdditionalValuesFiles...)
	var out []ChartFile
	for _, v := range values {
		f, err := r.readValues(dir, where, v)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// renderTwice renders req twice and refuses a chart whose two renders
// differ, naming the first template that does.
func renderTwice(cr ChartRenderer, req ChartRequest, where string) (*ChartOutput, error) {
	out, err := cr.RenderChart(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	again, err := cr.RenderChart(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if src, same := sameDocs(out.Docs, again.Docs); !same {
		return nil, fmt.Errorf("%s: chart %q does not render reproducibly: template %q gave different output on two renders with the same inputs; a locked release needs a byte-for-byte reproducible render (pin the value instead of generating it)", where, req.Path, src)
	}
	return out, nil
}

func path2(a, b string) string { return filepath.ToSlash(filepath.Join(a, b)) }

// sameDocs reports whether two renders agree, and if not the first
// template whose output differs.
func sameDocs(a, b []ChartDoc) (string, bool) {
	for i := range max(len(a), len(b)) {
		switch {
		case i >= len(a):
			return b[i].Source, false
		case i >= len(b):
			return a[i].Source, false
		case !reflect.DeepEqual(a[i], b[i]):
			return a[i].Source, false
		}
	}
	return "", true
}

// readValues reads the values file v of a helmCharts entry: a local file
// inside the kustomization's directory, also once links are resolved.
func (r *recorder) readValues(dir, where, v string) (ChartFile, error) {
	p := filepath.Join(dir, filepath.FromSlash(v))
	if isRemote(v) {
		return ChartFile{}, fmt.Errorf("%s: values file %q is remote; a locked release reads local files only", where, v)
	}
	if !inside(dir, p) {
		return ChartFile{}, fmt.Errorf("%s: values file %q is outside the kustomization's directory; keep values files in the release", where, v)
	}
	d, f, err := r.FileSystem.CleanedAbs(p)
	if err != nil || f == "" {
		return ChartFile{}, fmt.Errorf("%s: values file %q is not a file in the release", where, v)
	}
	if !inside(r.root, d.Join(f)) {
		return ChartFile{}, fmt.Errorf("%s: values file %q leads outside the release (%s)", where, v, d.Join(f))
	}
	data, name, err := r.record(p)
	if err != nil {
		return ChartFile{}, fmt.Errorf("%s: values file %q: %w", where, v, err)
	}
	return ChartFile{Path: name, Data: data}, nil
}

// archiveNames are the chart archives an entry may name, beside its
// directory: NAME-VERSION.tgz (as helm pull leaves it) and NAME.tgz.
func archiveNames(h types.HelmChart) []string {
	var out []string
	if h.Version != "" {
		out = append(out, h.Name+"-"+h.Version+".tgz")
	}
	return append(out, h.Name+".tgz")
}

// readChartOrArchive reads the chart directory chartDir, or else the first
// chart archive beside it; it returns the files or the archive and the
// path read, "" when there is neither.
func (r *recorder) readChartOrArchive(chartDir string, h types.HelmChart) ([]ChartFile, []byte, string, error) {
	if r.FileSystem.IsDir(chartDir) {
		if d, _, err := r.FileSystem.CleanedAbs(chartDir); err != nil || !inside(r.root, string(d)) || string(d) != filepath.Clean(chartDir) {
			return nil, nil, "", fmt.Errorf("chart directory %q is a link, or leads outside the release; vendor the chart itself", relPath(r.root, chartDir))
		}
		files, err := r.readChart(chartDir)
		return files, nil, chartDir, err
	}
	for _, name := range archiveNames(h) {
		p := filepath.Join(filepath.Dir(chartDir), name)
		if r.FileSystem.Exists(p) && !r.FileSystem.IsDir(p) {
			if d, f, err := r.FileSystem.CleanedAbs(p); err != nil || !inside(r.root, d.Join(f)) {
				return nil, nil, "", fmt.Errorf("chart archive %q leads outside the release; vendor the archive itself", relPath(r.root, p))
			}
			data, _, err := r.record(p)
			return nil, data, p, err
		}
	}
	return nil, nil, "", nil
}

// readChart reads every file under the chart directory (recorded as source
// files), paths relative to it, sorted. Links to files are followed; any
// other irregular file is an error.
func (r *recorder) readChart(chartDir string) ([]ChartFile, error) {
	var out []ChartFile
	err := r.FileSystem.Walk(chartDir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() {
			return nil
		}
		if !info.Mode().IsRegular() && info.Mode()&os.ModeSymlink == 0 {
			return fmt.Errorf("chart file %q is not a regular file", relPath(r.root, p))
		}
		if info.Mode()&os.ModeSymlink != 0 {
			d, f, err := r.FileSystem.CleanedAbs(p)
			if err != nil || f == "" || !inside(r.root, d.Join(f)) {
				return fmt.Errorf("chart file %q is a link that leads outside the release, or to no file; vendor the file itself", relPath(r.root, p))
			}
		}
		data, _, err := r.record(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(chartDir, p)
		if err != nil {
			return err
		}
		out = append(out, ChartFile{Path: filepath.ToSlash(rel), Data: data})
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b ChartFile) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// cleanedAbsVirtual resolves the in-memory chart resource, which has no
// file to resolve.
func (r *recorder) cleanedAbsVirtual(p string) (filesys.ConfirmedDir, string, bool) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", "", false
	}
	r.mu.Lock()
	_, ok := r.virtual[abs]
	r.mu.Unlock()
	if !ok {
		return "", "", false
	}
	return filesys.ConfirmedDir(filepath.Dir(abs)), filepath.Base(abs), true
}
