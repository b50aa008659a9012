package inventory

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Helm charts vendored in a release (docs/lock.md, "Helm charts"). The
// inventory declares what a chart renderer is given and returns; the Helm
// SDK itself lives in internal/helmchart, which registers itself with
// SetChartRenderer, so that this package links no cluster client (Helm's
// template engine carries one for `lookup`).

// ChartRenderer renders one vendored chart in-process.
type ChartRenderer interface {
	// SDKVersion is the version of the Helm SDK that renders ("v4.3.2").
	SDKVersion() string
	// DefaultKubeVersion is the Kubernetes version the templates see when
	// the release names none ("v1.37.0").
	DefaultKubeVersion() string
	// RenderChart renders req; every error names the chart or the file.
	RenderChart(req ChartRequest) (*ChartOutput, error)
}

// ChartRequest is one helmCharts entry, with every file it needs already
// read (and so recorded as a source file).
type ChartRequest struct {
	// Path is the chart directory's source path, for errors ("charts/web").
	Path string
	// Files are the files of the chart directory, paths relative to it,
	// slash-separated, sorted; nil for a chart archive.
	Files []ChartFile
	// Archive is the chart archive (.tgz) when the chart is vendored as one.
	Archive []byte
	// Values are the values files in the order they apply, each named by its
	// source path; Inline (valuesInline) applies right after Values[0] when
	// InlineAfterFirst, else first.
	Values           []ChartFile
	Inline           map[string]any
	InlineAfterFirst bool
	// ReleaseName and Namespace are .Release.Name and .Release.Namespace.
	ReleaseName, Namespace string
	// KubeVersion is .Capabilities.KubeVersion ("v1.37.0"); APIVersions are
	// added to the SDK's default .Capabilities.APIVersions.
	KubeVersion string
	APIVersions []string
	// IncludeCRDs renders the chart's crds/ (and its subcharts').
	IncludeCRDs bool
	// SkipHooks leaves hook templates out; otherwise a hook is an error.
	// Test hooks are always left out.
	SkipHooks bool
}

// ChartFile is a file's path and content.
type ChartFile struct {
	Path string
	Data []byte
}

// ChartOutput is a rendered chart.
type ChartOutput struct {
	// Name and Version are the chart's, from its Chart.yaml.
	Name, Version string
	// APIVersions is the full .Capabilities.APIVersions the templates saw,
	// sorted and unique.
	APIVersions []string
	// Docs are the rendered manifests (CRDs first), each a YAML stream.
	Docs []ChartDoc
}

// ChartDoc is one rendered template.
type ChartDoc struct {
	// Source is the template's path in the chart ("web/templates/svc.yaml").
	Source string
	YAML   string
}

var (
	chartMu       sync.RWMutex
	chartRenderer ChartRenderer
)

// SetChartRenderer installs the renderer of Helm charts; without one, a
// release that declares helmCharts is refused.
func SetChartRenderer(r ChartRenderer) {
	chartMu.Lock()
	defer chartMu.Unlock()
	chartRenderer = r
}

func currentChartRenderer() ChartRenderer {
	chartMu.RLock()
	defer chartMu.RUnlock()
	return chartRenderer
}

// Digest domains of the Helm section (docs/digests.md).
const (
	DomainHelmChart       = "helm-chart"
	DomainHelmAPIVersions = "helm-api-versions"
	DomainRenderCacheHelm = "render-cache-helm"
)

// LockHelm is the lock's helm section: present only when the release
// renders Helm charts.
type LockHelm struct {
	// SDK is the Helm SDK version that rendered the charts.
	SDK    string      `json:"sdk" yaml:"sdk"`
	Charts []LockChart `json:"charts" yaml:"charts"`
}

// LockChart binds one helmCharts entry.
type LockChart struct {
	// Kustomization is the source path of the kustomization declaring it.
	Kustomization string `json:"kustomization" yaml:"kustomization"`
	ReleaseName   string `json:"releaseName" yaml:"releaseName"`
	Namespace     string `json:"namespace" yaml:"namespace"`
	// Name and Version are the chart's own (Chart.yaml).
	Name    string `json:"name" yaml:"name"`
	Version string `json:"version" yaml:"version"`
	// Path is the chart directory's source path.
	Path string `json:"path" yaml:"path"`
	// Digest is the chart tree digest: every file of the chart directory
	// with its source-file digest, paths relative to Path.
	Digest string `json:"digest" yaml:"digest"`
	// Values are the values files, as source files.
	Values []SourceFile `json:"values" yaml:"values"`
	// KubeVersion is .Capabilities.KubeVersion.
	KubeVersion string `json:"kubeVersion" yaml:"kubeVersion"`
	// APIVersions are the versions the release added to the SDK's default
	// set; APIVersionsDigest is the digest of the full set.
	APIVersions       []string `json:"apiVersions" yaml:"apiVersions,flow"`
	APIVersionsDigest string   `json:"apiVersionsDigest" yaml:"apiVersionsDigest"`
}

// label names a chart in messages: its path and release name.
func (c LockChart) label() string { return fmt.Sprintf("%s (release %s)", c.Path, c.ReleaseName) }

// ChartDigest is the chart tree digest of files, each named relative to the
// chart directory, sorted by path.
func ChartDigest(files []SourceFile) (string, error) {
	if files == nil {
		files = []SourceFile{}
	}
	return DigestOf(DomainHelmChart, files)
}

// chartTree is the chart tree of the chart at path: the source files under
// the directory path, named relative to it, or for a chart archive the
// archive alone, named by its base name.
func chartTree(sources []SourceFile, path string) []SourceFile {
	var tree []SourceFile
	for _, f := range sources {
		if rel, ok := strings.CutPrefix(f.Path, path+"/"); ok {
			tree = append(tree, SourceFile{Path: rel, Digest: f.Digest})
		} else if f.Path == path {
			tree = append(tree, SourceFile{Path: path[strings.LastIndex(path, "/")+1:], Digest: f.Digest})
		}
	}
	return tree
}

// APIVersionsDigest is the digest of the sorted, unique API version set.
func APIVersionsDigest(versions []string) (string, error) {
	if versions == nil {
		versions = []string{}
	}
	return DigestOf(DomainHelmAPIVersions, versions)
}

// finishHelm fills each chart's digests from the release's source files,
// which carry the Secret policy's keyed or redacted digests.
func finishHelm(h *LockHelm, sources []SourceFile) error {
	if h == nil {
		return nil
	}
	by := make(map[string]string, len(sources))
	for _, f := range sources {
		by[f.Path] = f.Digest
	}
	for i := range h.Charts {
		c := &h.Charts[i]
		var err error
		if c.Digest, err = ChartDigest(chartTree(sources, c.Path)); err != nil {
			return err
		}
		for j := range c.Values {
			d, ok := by[c.Values[j].Path]
			if !ok {
				return fmt.Errorf("chart %s: values file %q was not read", c.label(), c.Values[j].Path)
			}
			c.Values[j].Digest = d
		}
	}
	slices.SortFunc(h.Charts, func(a, b LockChart) int {
		return strings.Compare(a.Kustomization+"\x00"+a.ReleaseName+"\x00"+a.Path, b.Kustomization+"\x00"+b.ReleaseName+"\x00"+b.Path)
	})
	return nil
}

// clone copies h deeply.
func (h *LockHelm) clone() *LockHelm {
	if h == nil {
		return nil
	}
	c := &LockHelm{SDK: h.SDK, Charts: slices.Clone(h.Charts)}
	for i := range c.Charts {
		c.Charts[i].Values = slices.Clone(c.Charts[i].Values)
		c.Charts[i].APIVersions = slices.Clone(c.Charts[i].APIVersions)
	}
	return c
}
