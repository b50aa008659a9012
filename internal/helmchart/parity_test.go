package helmchart

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/qinglong/kubectl-ql3/third_party/kustomize-api/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/inventory"
)

// helmBinary is the pinned helm (HELM_VERSION in the Makefile): $QL3_HELM
// when set, else bin/tools/helm of the repository (make tools builds it).
// A missing helm is a failure, not a skip.
func helmBinary(t *testing.T) string {
	t.Helper()
	p := os.Getenv("QL3_HELM")
	if p == "" {
		p = filepath.Join("..", "..", "bin", "tools", "helm")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("helm binary: %v; build it with make tools, or set QL3_HELM to a helm %s", err, SDKVersion)
	}
	return p
}

// helmTemplateArgs are the `helm template` arguments equivalent to the
// helmCharts entry h of the kustomization in dir.
func helmTemplateArgs(dir string, h types.HelmChart, chart string) []string {
	args := []string{"template", h.ReleaseName, chart, "--namespace", h.Namespace, "--skip-tests"}
	if h.ValuesFile != "" {
		args = append(args, "-f", filepath.Join(dir, h.ValuesFile))
	}
	for _, v := range h.AdditionalValuesFiles {
		args = append(args, "-f", filepath.Join(dir, v))
	}
	if h.KubeVersion != "" {
		args = append(args, "--kube-version", h.KubeVersion)
	}
	for _, a := range h.ApiVersions {
		args = append(args, "--api-versions", a)
	}
	if h.IncludeCRDs {
		args = append(args, "--include-crds")
	}
	if h.SkipHooks {
		args = append(args, "--no-hooks")
	}
	return args
}

// canonicalSet is the objects of a YAML stream, each as canonical JSON,
// sorted.
func canonicalSet(t *testing.T, stream []byte) []string {
	t.Helper()
	var out []string
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(stream), 4096)
	for {
		var o map[string]any
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(o) == 0 {
			continue
		}
		c, err := inventory.Canonical(o)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(c))
	}
	slices.Sort(out)
	return out
}

// TestHelmTemplateParity renders every fixture release of testdata/helm
// in-process and its chart with the pinned `helm template` (the same
// release name, namespace, values, capabilities, CRDs and hook flags), and
// requires the same objects, byte for byte after canonicalisation. The
// fixtures' kustomizations only declare the chart, so kustomize changes
// nothing; a difference is the SDK render's.
func TestHelmTemplateParity(t *testing.T) {
	helm := helmBinary(t)
	fixtures, err := filepath.Glob(filepath.Join("..", "..", "testdata", "helm", "*", "kustomization.yaml"))
	if err != nil || len(fixtures) < 2 {
		t.Fatalf("fixtures: %v %v", fixtures, err)
	}
	for _, kf := range fixtures {
		dir := filepath.Dir(kf)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			checkParity(t, helm, dir, func(h types.HelmChart) string { return filepath.Join(dir, "charts", h.Name) })
		})
	}
	t.Run("v1.0.0 as an archive", func(t *testing.T) {
		dir := archiveFixture(t)
		checkParity(t, helm, dir, func(h types.HelmChart) string { return filepath.Join(dir, "charts", h.Name+"-"+h.Version+".tgz") })
	})
}

// checkParity compares the in-process render of the release in dir with
// `helm template` of each of its charts (found by chart).
func checkParity(t *testing.T, helm, dir string, chart func(types.HelmChart) string) {
	kf := filepath.Join(dir, "kustomization.yaml")
	data, err := os.ReadFile(kf)
	if err != nil {
		t.Fatal(err)
	}
	var k types.Kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatal(err)
	}
	if len(k.HelmCharts) == 0 || len(k.Resources) > 0 || k.Namespace != "" {
		t.Fatalf("%s: a parity fixture declares charts and nothing else", kf)
	}
	var theirs []byte
	for _, h := range k.HelmCharts {
		if len(h.ValuesInline) > 0 {
			t.Fatalf("%s: valuesInline has no helm template flag; use values files in parity fixtures", kf)
		}
		var stdout, stderr bytes.Buffer
		cmd := exec.Command(helm, helmTemplateArgs(dir, h, chart(h))...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %s: %v\n%s", helm, strings.Join(cmd.Args[1:], " "), err, stderr.Bytes())
		}
		theirs = append(append(theirs, stdout.Bytes()...), "\n---\n"...)
	}
	r := render(t, dir)
	var ours []byte
	for _, o := range r.Objects {
		j, err := o.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		ours = append(append(ours, j...), "\n---\n"...)
	}
	if diff := cmp.Diff(canonicalSet(t, theirs), canonicalSet(t, ours)); diff != "" {
		t.Errorf("helm template (-) vs in-process render (+):\n%s", diff)
	}
}
