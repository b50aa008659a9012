package helmchart

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/inventory/rendercache"
)

var clusterIdentity = inventory.ClusterIdentity("00000000-0000-4000-8000-000000000000")

// lockDir renders dir, locks it and writes the lock; it returns the lock.
func lockDir(t *testing.T, dir string) *inventory.Lock {
	t.Helper()
	l, err := inventory.NewLock(render(t, dir), "1.0.0", clusterIdentity, "v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	data, err := l.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inventory.WriteLockFile(filepath.Join(dir, inventory.LockFile), data, true); err != nil {
		t.Fatal(err)
	}
	back, err := inventory.ParseLock(data)
	if err != nil {
		t.Fatalf("the lock written does not parse: %v\n%s", err, data)
	}
	return back
}

// The lock binds each chart: name, version, tree digest, values digests,
// the SDK and the capabilities; the lock round-trips and verifies.
func TestLockBindsChart(t *testing.T) {
	dir := fixture(t)
	l := lockDir(t, dir)
	if l.Helm == nil || l.Helm.SDK != SDKVersion || len(l.Helm.Charts) != 1 {
		t.Fatalf("helm section: %+v", l.Helm)
	}
	c := l.Helm.Charts[0]
	if c.Kustomization != "kustomization.yaml" || c.ReleaseName != "web" || c.Namespace != "helm-demo" || c.Name != "web" ||
		c.Version != "1.2.0" || c.Path != "charts/web" || c.KubeVersion != "v1.36.0" ||
		strings.Join(c.APIVersions, ",") != "helm.demo.qinglong.io/v1" || !inventory.IsDigest(c.APIVersionsDigest) {
		t.Errorf("chart: %+v", c)
	}
	data, err := os.ReadFile(filepath.Join(dir, "values", "prod.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Values) != 1 || c.Values[0].Path != "values/prod.yaml" || c.Values[0].Digest != inventory.FileDigest(data) {
		t.Errorf("values: %+v", c.Values)
	}
	if _, _, err := inventory.LoadRelease(filesys.MakeFsOnDisk(), dir, inventory.Options{}); err != nil {
		t.Fatalf("lock verify of an unchanged release: %v", err)
	}
}

// A values change, a chart file change, a subchart change (even one the
// render does not show) and a change of a file Helm ignores each change
// the lock's digests and are refused (exit 5, naming the chart) until the
// release is locked again.
func TestLockRefusesChartChanges(t *testing.T) {
	tests := []struct {
		name, file string
		edit       func(string) string
		field      string // the helm field that must differ
	}{
		{"values file", "values/prod.yaml", replace("hello from prod", "hello again"), ".values"},
		{"chart template", "charts/web/templates/config.yaml", replace("  message:", "  extra: \"1\"\n  message:"), ".digest"},
		{"subchart default", "charts/web/charts/cache/values.yaml", replace("size: 8", "size: 9"), ".digest"},
		{"ignored file", "charts/web/README.md", func(s string) string { return s + "more\n" }, ".digest"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := fixture(t)
			before := lockDir(t, dir)
			edit(t, dir, tc.file, tc.edit)
			_, _, err := inventory.LoadRelease(filesys.MakeFsOnDisk(), dir, inventory.Options{})
			if err == nil {
				t.Fatal("a changed chart verified against the old lock")
			}
			if c := fail.ClassOf(err); c != fail.Tamper {
				t.Errorf("class %v, want tamper (exit 5): %v", c, err)
			}
			want := `helm.charts["charts/web (release web)"]` + tc.field + ": changed"
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `source.files["`+tc.file+`"]: changed`) {
				t.Errorf("error lacks %q or the file:\n%v", want, err)
			}
			after := lockDir(t, dir)
			if d1, d2 := mustDigest(t, before), mustDigest(t, after); d1 == d2 {
				t.Errorf("the lock digest did not change")
			}
			if _, _, err := inventory.LoadRelease(filesys.MakeFsOnDisk(), dir, inventory.Options{}); err != nil {
				t.Errorf("relocked release does not verify: %v", err)
			}
		})
	}
}

func mustDigest(t *testing.T, l *inventory.Lock) string {
	t.Helper()
	d, err := l.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A lock whose helm section was edited (here: the Kubernetes version the
// templates see), or removed, no longer verifies, though every file is
// unchanged; and a lock whose chart digest disagrees with its own
// source.files does not even parse.
func TestLockHelmSectionTampered(t *testing.T) {
	dir := fixture(t)
	l := lockDir(t, dir)
	r := render(t, dir)

	edited := *l
	edited.Helm = &inventory.LockHelm{SDK: l.Helm.SDK, Charts: append([]inventory.LockChart(nil), l.Helm.Charts...)}
	edited.Helm.Charts[0].KubeVersion = "v1.35.0"
	err := inventory.VerifyLock(&edited, r)
	if fail.ClassOf(err) != fail.Tamper || !strings.Contains(err.Error(), `helm.charts["charts/web (release web)"].kubeVersion: changed: lock "v1.35.0", release "v1.36.0"`) {
		t.Errorf("edited kubeVersion: %v", err)
	}
	edited.Helm = nil
	err = inventory.VerifyLock(&edited, r)
	if fail.ClassOf(err) != fail.Tamper || !strings.Contains(err.Error(), "the lock binds none") {
		t.Errorf("helm section removed: %v", err)
	}

	data, err := l.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Replace(data, []byte("digest: "+l.Helm.Charts[0].Digest), []byte("digest: "+l.Render.Digest), 1)
	var le *inventory.LockError
	if _, err := inventory.ParseLock(bad); !errors.As(err, &le) || !strings.Contains(err.Error(), "helm.charts[0].digest") {
		t.Errorf("lock with a foreign chart digest: %v", err)
	}
	unknown := bytes.Replace(data, []byte("      kubeVersion:"), []byte("      hooks: true\n      kubeVersion:"), 1)
	if _, err := inventory.ParseLock(unknown); err == nil || !strings.Contains(err.Error(), "helm.charts[0].hooks: unknown field") {
		t.Errorf("lock with an unknown chart field: %v", err)
	}
}

// The render cache covers charts with the same trust rules: a release
// with a chart is stored and hit, and a lock whose helm section was
// edited misses (the key binds the section) and then fails verification.
func TestRenderCacheCoversCharts(t *testing.T) {
	dir := fixture(t)
	l := lockDir(t, dir)
	c := &rendercache.Cache{Dir: filepath.Join(t.TempDir(), "render"), Build: inventory.DigestBytes("x", []byte("test build")), MACKey: bytes.Repeat([]byte{7}, rendercache.KeySize)}
	fsys := filesys.MakeFsOnDisk()
	if _, _, use, err := inventory.LoadReleaseCached(fsys, dir, inventory.Options{}, c); err != nil || !use.Stored {
		t.Fatalf("first load: %v %v", use, err)
	}
	r, _, use, err := inventory.LoadReleaseCached(fsys, dir, inventory.Options{}, c)
	if err != nil || !use.Hit {
		t.Fatalf("second load: %v %v", use, err)
	}
	if r.Helm == nil || r.Helm.Charts[0].Digest != l.Helm.Charts[0].Digest {
		t.Errorf("hit's helm section: %+v", r.Helm)
	}

	l.Helm.Charts[0].KubeVersion = "v1.35.0"
	data, err := l.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inventory.WriteLockFile(filepath.Join(dir, inventory.LockFile), data, true); err != nil {
		t.Fatal(err)
	}
	_, _, use, err = inventory.LoadReleaseCached(fsys, dir, inventory.Options{}, c)
	if use.Hit || fail.ClassOf(err) != fail.Tamper || !strings.Contains(err.Error(), "kubeVersion") {
		t.Errorf("edited helm section: %v, %v; want a miss and a tamper refusal", use, err)
	}
}

// A file added to a chart directory after locking is read by Helm though
// no listed file changed: the render cache must miss (it re-hashes only
// the files the lock lists, so it also lists each chart's directory), and
// the fresh render is refused against the lock.
func TestRenderCacheSeesNewChartFile(t *testing.T) {
	dir := fixture(t)
	lockDir(t, dir)
	c := &rendercache.Cache{Dir: filepath.Join(t.TempDir(), "render"), Build: inventory.DigestBytes("x", []byte("test build")), MACKey: bytes.Repeat([]byte{7}, rendercache.KeySize)}
	fsys := filesys.MakeFsOnDisk()
	if _, _, use, err := inventory.LoadReleaseCached(fsys, dir, inventory.Options{}, c); err != nil || !use.Stored {
		t.Fatalf("first load: %v %v", use, err)
	}
	write(t, filepath.Join(dir, "charts", "web", "templates", "extra.yaml"),
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra\n  namespace: {{ .Release.Namespace }}\n")
	r, _, use, err := inventory.LoadReleaseCached(fsys, dir, inventory.Options{}, c)
	if use.Hit || err == nil {
		t.Fatalf("a chart with a new template: %v, %d objects, %v; want a miss and a refusal", use, len(r.Objects), err)
	}
	if use.Reason != "source files changed" || !strings.Contains(err.Error(), `source.files["charts/web/templates/extra.yaml"]: read by the kustomization but not in the lock`) {
		t.Errorf("miss %q, error %v", use.Reason, err)
	}
}
