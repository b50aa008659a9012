// Package helmchart renders Helm charts vendored in a release with the Helm
// SDK, in-process and deterministically (docs/lock.md, "Helm charts"). It
// registers itself as inventory's chart renderer: Register.
//
// Helm's template engine links a Kubernetes client for its `lookup`
// function; this package never gives it one, so `lookup` returns an empty
// result and no render contacts a cluster.
package helmchart

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	"helm.sh/helm/v4/pkg/ignore"
	release "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"

	"github.com/qinglong/kubectl-ql3/inventory"
)

const (
	// SDKVersion is the version of helm.sh/helm/v4 linked (go.mod; a test
	// checks the two agree).
	SDKVersion = "v4.3.2"
	// DefaultKubeVersion is .Capabilities.KubeVersion when the release names
	// none: the Kubernetes minor of the linked client-go (v0.37 -> v1.37.0),
	// as Helm's own default, but fixed here so tests and the plugin agree.
	DefaultKubeVersion = "v1.37.0"
)

// Renderer renders charts with the Helm SDK.
type Renderer struct{}

// Register installs Renderer as inventory's chart renderer.
func Register() { inventory.SetChartRenderer(Renderer{}) }

func (Renderer) SDKVersion() string         { return SDKVersion }
func (Renderer) DefaultKubeVersion() string { return DefaultKubeVersion }

// Refused are the template functions whose result is not a function of the
// chart and its values (randomness, the clock); calling one is an error
// naming the template. Rendering twice and comparing catches the rest.
var Refused = []string{
	"randAlphaNum", "randAlpha", "randNumeric", "randAscii", "randBytes", "randInt", "uuidv4", "shuffle",
	"now", "ago", "genPrivateKey", "genCA", "genCAWithKey", "genSelfSignedCert", "genSelfSignedCertWithKey",
	"genSignedCert", "genSignedCertWithKey", "encryptAES", "bcrypt", "htpasswd",
}

func refusedFuncs() map[string]any {
	m := map[string]any{}
	for _, name := range Refused {
		m[name] = func(...any) (string, error) {
			return "", fmt.Errorf("%s is not reproducible: a locked release renders byte for byte the same every time; pass the value in a values file instead", name)
		}
	}
	return m
}

// RenderChart renders one chart as `helm template` would with the same
// release name, namespace, values, --kube-version, --api-versions,
// --include-crds and --skip-tests, then applies the hook policy.
func (Renderer) RenderChart(req inventory.ChartRequest) (*inventory.ChartOutput, error) {
	ch, err := load(req)
	if err != nil {
		return nil, err
	}
	vals, err := values(req)
	if err != nil {
		return nil, err
	}
	if err := checkDependencies(ch, req.Path); err != nil {
		return nil, err
	}
	if err := checkSchemas(ch, req.Path); err != nil {
		return nil, err
	}
	if err := chartutil.ProcessDependencies(ch, vals); err != nil {
		return nil, fmt.Errorf("chart %q: dependencies: %w", req.Path, err)
	}
	caps, all, err := capabilities(req)
	if err != nil {
		return nil, err
	}
	if ch.Metadata.KubeVersion != "" && !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, caps.KubeVersion.String()) {
		return nil, fmt.Errorf("chart %q requires kubeVersion %s, incompatible with %s (set kubeVersion in the helmCharts entry)", req.Path, ch.Metadata.KubeVersion, caps.KubeVersion.Version)
	}
	opts := common.ReleaseOptions{Name: req.ReleaseName, Namespace: req.Namespace, Revision: 1, IsInstall: true}
	top, err := util.ToRenderValuesWithSchemaValidation(ch, vals, opts, caps, false)
	if err != nil {
		return nil, fmt.Errorf("chart %q: values do not match %s: %w", req.Path, schemaFile(ch, req.Path), err)
	}
	e := engine.Engine{CustomTemplateFuncs: refusedFuncs()}
	files, err := e.RenderWithContext(context.Background(), ch, top)
	if err != nil {
		return nil, fmt.Errorf("chart %q: %w", req.Path, err)
	}
	docs, err := documents(ch, files, req)
	if err != nil {
		return nil, err
	}
	return &inventory.ChartOutput{Name: ch.Metadata.Name, Version: ch.Metadata.Version, APIVersions: all, Docs: docs}, nil
}

// schemaFile names the schema a values error comes from.
func schemaFile(ch *chart.Chart, dir string) string {
	if len(ch.Schema) > 0 {
		return dir + "/values.schema.json"
	}
	return "a subchart's values.schema.json (under " + dir + "/charts/)"
}

// load builds the chart from its archive, or from its files as Helm's
// directory loader does: .helmignore (and Helm's defaults) applied, a
// leading UTF-8 BOM dropped.
func load(req inventory.ChartRequest) (*chart.Chart, error) {
	if req.Archive != nil {
		ch, err := loader.LoadArchive(bytes.NewReader(req.Archive))
		if err != nil {
			return nil, fmt.Errorf("chart archive %q: %w", req.Path, err)
		}
		return ch, nil
	}
	rules := ignore.Empty()
	for _, f := range req.Files {
		if f.Path == ignore.HelmIgnore {
			r, err := ignore.Parse(bytes.NewReader(f.Data))
			if err != nil {
				return nil, fmt.Errorf("%s/%s: %w", req.Path, ignore.HelmIgnore, err)
			}
			rules = r
		}
	}
	rules.AddDefaults()
	var files []*archive.BufferedFile
	for _, f := range req.Files {
		if ignored(rules, f.Path) {
			continue
		}
		files = append(files, &archive.BufferedFile{Name: f.Path, Data: bytes.TrimPrefix(f.Data, []byte{0xEF, 0xBB, 0xBF})})
	}
	ch, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("chart %q: %w", req.Path, err)
	}
	return ch, nil
}

// ignored applies the rules to the file and each directory above it, as
// Helm's walk skips an ignored directory whole.
func ignored(rules *ignore.Rules, p string) bool {
	parts := strings.Split(p, "/")
	for i := 1; i < len(parts); i++ {
		if rules.Ignore(strings.Join(parts[:i], "/"), fileInfo{name: parts[i-1], dir: true}) {
			return true
		}
	}
	return rules.Ignore(p, fileInfo{name: path.Base(p)})
}

// fileInfo is the os.FileInfo the ignore rules look at: name and kind.
type fileInfo struct {
	name string
	dir  bool
}

func (f fileInfo) Name() string { return f.name }
func (f fileInfo) Size() int64  { return 0 }
func (f fileInfo) Mode() os.FileMode {
	if f.dir {
		return os.ModeDir | 0o755
	}
	return 0o644
}
func (f fileInfo) ModTime() time.Time { return time.Time{} }
func (f fileInfo) IsDir() bool        { return f.dir }
func (f fileInfo) Sys() any           { return nil }

// values merges the values files and valuesInline in order, as helm's -f
// does (later wins, maps merged).
func values(req inventory.ChartRequest) (map[string]any, error) {
	base := map[string]any{}
	if req.Inline != nil && !req.InlineAfterFirst {
		base = loader.MergeMaps(base, req.Inline)
	}
	for i, f := range req.Values {
		cur, err := loader.LoadValues(bytes.NewReader(f.Data))
		if err != nil {
			return nil, fmt.Errorf("values file %q: %w", f.Path, err)
		}
		base = loader.MergeMaps(base, cur)
		if i == 0 && req.Inline != nil && req.InlineAfterFirst {
			base = loader.MergeMaps(base, req.Inline)
		}
	}
	return base, nil
}

// checkDependencies refuses a chart whose Chart.yaml lists a dependency
// missing from its charts/ directory (helm's CheckDependencies), naming it.
func checkDependencies(ch *chart.Chart, dir string) error {
	var missing []string
	for _, d := range ch.Metadata.Dependencies {
		if !slices.ContainsFunc(ch.Dependencies(), func(s *chart.Chart) bool { return s.Name() == d.Name }) {
			missing = append(missing, d.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("chart %q: dependencies %q are listed in %s/Chart.yaml but missing from %s/charts/; vendor them with helm dependency build %s", dir, missing, dir, dir, dir)
	}
	for _, sub := range ch.Dependencies() {
		if err := checkDependencies(sub, dir+"/charts/"+sub.Name()); err != nil {
			return err
		}
	}
	return nil
}

// capabilities are the fixed .Capabilities: the request's Kubernetes
// version, the SDK's default API versions plus the request's, and a Helm
// version of SDKVersion alone (no Go version, no commit). It also returns
// the full API version set, sorted and unique.
func capabilities(req inventory.ChartRequest) (*common.Capabilities, []string, error) {
	kv, err := common.ParseKubeVersion(req.KubeVersion)
	if err != nil {
		return nil, nil, fmt.Errorf("chart %q: kubeVersion %q: %w", req.Path, req.KubeVersion, err)
	}
	caps := common.DefaultCapabilities.Copy()
	caps.KubeVersion = *kv
	caps.APIVersions = append(slices.Clone(caps.APIVersions), req.APIVersions...)
	caps.HelmVersion.Version = SDKVersion
	caps.HelmVersion.GitCommit, caps.HelmVersion.GitTreeState, caps.HelmVersion.GoVersion = "", "", ""
	all := slices.Clone([]string(caps.APIVersions))
	slices.Sort(all)
	return caps, slices.Compact(all), nil
}

// documents turns the rendered templates into documents: CRDs first when
// asked for, then the manifests in Helm's install order, then nothing of
// the hooks: test hooks are dropped, other hooks are dropped with
// SkipHooks and refused without it. NOTES.txt and partials are not
// manifests.
func documents(ch *chart.Chart, files map[string]string, req inventory.ChartRequest) ([]inventory.ChartDoc, error) {
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("chart %q: %w", req.Path, err)
	}
	var docs []inventory.ChartDoc
	if req.IncludeCRDs {
		for _, crd := range ch.CRDObjects() {
			docs = append(docs, inventory.ChartDoc{Source: crd.Filename, YAML: string(crd.File.Data)})
		}
	}
	for _, m := range manifests {
		docs = append(docs, inventory.ChartDoc{Source: m.Name, YAML: m.Content})
	}
	var errs []error
	for _, h := range hooks {
		if slices.Contains(h.Events, release.HookTest) || req.SkipHooks {
			continue
		}
		errs = append(errs, fmt.Errorf("template %q: %s %q is a Helm hook (%s); a locked release applies no hooks: set skipHooks: true in the helmCharts entry to leave hooks out (docs/lock.md, Helm charts)", h.Path, h.Kind, h.Name, hookEvents(h)))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("chart %q: %w", req.Path, errors.Join(errs...))
	}
	return docs, nil
}

func hookEvents(h *release.Hook) string {
	var s []string
	for _, e := range h.Events {
		s = append(s, e.String())
	}
	return "helm.sh/hook: " + strings.Join(s, ",")
}
