package helmchart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/inventory"
)

// archiveFixture is the fixture with its chart packaged as
// charts/web-1.2.0.tgz (as `helm pull` without --untar leaves it) and the
// chart directory removed.
func archiveFixture(t *testing.T) string {
	t.Helper()
	dir := fixture(t)
	packageChart(t, dir)
	return dir
}

// packageChart replaces dir's charts/web by the archive charts/web-1.2.0.tgz.
func packageChart(t *testing.T, dir string) {
	t.Helper()
	charts := filepath.Join(dir, "charts")
	ch, err := loader.LoadDir(filepath.Join(charts, "web"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chartutil.Save(ch, charts); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(charts, "web")); err != nil {
		t.Fatal(err)
	}
}

// A chart vendored as an archive renders the same objects as its
// directory; its tree is the archive, so the chart digest is that of the
// one file, named by its base name.
func TestChartArchive(t *testing.T) {
	want := render(t, fixture(t))
	dir := archiveFixture(t)
	r := render(t, dir)
	if diff := cmp.Diff(want.RenderDigest, r.RenderDigest); diff != "" {
		for i := range r.Objects {
			t.Logf("%v", r.Objects[i].Object)
		}
		t.Fatalf("the archive renders otherwise than the directory")
	}
	data, err := os.ReadFile(filepath.Join(dir, "charts", "web-1.2.0.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := inventory.ChartDigest([]inventory.SourceFile{{Path: "web-1.2.0.tgz", Digest: inventory.FileDigest(data)}})
	if err != nil {
		t.Fatal(err)
	}
	c := r.Helm.Charts[0]
	if c.Path != "charts/web-1.2.0.tgz" || c.Digest != d || c.Version != "1.2.0" {
		t.Errorf("archive chart binding: %+v, want digest %s", c, d)
	}
	lockDir(t, dir) // the lock's own consistency checks accept an archive tree
}

// A chart archive is compressed, so no Secret value shows in it: with
// Secret values in the render it is keyed, never bound by a bare hash.
func TestChartArchiveWithSecret(t *testing.T) {
	dir := secretFixture(t)
	packageChart(t, dir)
	r, err := inventory.Render(filesys.MakeFsOnDisk(), dir, inventory.Options{AllowSecretData: true, SecretDigestKey: []byte(strings.Repeat("k", 32))})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range r.Sources {
		if f.Path == "charts/web-1.2.0.tgz" && !strings.HasPrefix(f.Digest, inventory.HMACPrefix) {
			t.Errorf("the chart archive's source digest %s is not keyed", f.Digest)
		}
	}
}

// A chart archive linked from outside the release is refused.
func TestChartArchiveLinkedOutside(t *testing.T) {
	dir := archiveFixture(t)
	archive := filepath.Join(dir, "charts", "web-1.2.0.tgz")
	outside := filepath.Join(filepath.Dir(dir), "web-1.2.0.tgz")
	if err := os.Rename(archive, outside); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, archive); err != nil {
		t.Fatal(err)
	}
	_, err := inventory.Render(filesys.MakeFsOnDisk(), dir, inventory.Options{})
	if err == nil || !strings.Contains(err.Error(), `chart archive "charts/web-1.2.0.tgz" leads outside the release`) {
		t.Fatalf("render: %v", err)
	}
}
