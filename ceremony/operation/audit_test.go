package operation

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

// fixtures maps every fixture to the mode it is audited in and the one
// rule it violates ("" for the clean ones).
var fixtures = []struct {
	dir, repo string
	mode      Mode
	want      string
	shape     Shape
}{
	{dir: "operations/clean", mode: Committed},
	{dir: "operations/clean-deployable", mode: Deployable},
	{dir: "operations/deployment", mode: Committed, want: "deployment"},
	{dir: "operations/replicas", mode: Committed, want: "replicas"},
	{dir: "operations/development-single-replica", mode: Committed, want: "replicas", shape: Development},
	{dir: "operations/anti-affinity", mode: Committed, want: "anti-affinity"},
	{dir: "operations/max-unavailable", mode: Committed, want: "max-unavailable"},
	{dir: "operations/pdb-min-available", mode: Committed, want: "pdb-min-available"},
	{dir: "operations/service-account", mode: Committed, want: "service-account"},
	{dir: "operations/automount-token", mode: Committed, want: "automount-token"},
	{dir: "operations/rbac", mode: Committed, want: "rbac"},
	{dir: "operations/service", mode: Committed, want: "service"},
	{dir: "operations/probes", mode: Committed, want: "probes"},
	{dir: "operations/network-policy-ingress", mode: Committed, want: "network-policy-ingress"},
	{dir: "operations/network-policy-egress", mode: Committed, want: "network-policy-egress"},
	{dir: "operations/run-as-non-root", mode: Committed, want: "run-as-non-root"},
	{dir: "operations/read-only-root-filesystem", mode: Committed, want: "read-only-root-filesystem"},
	{dir: "operations/drop-all", mode: Committed, want: "drop-all"},
	{dir: "operations/seccomp", mode: Committed, want: "seccomp"},
	{dir: "operations/tls-mount", mode: Committed, want: "tls-mount"},
	{dir: "operations/identity-mount", mode: Committed, want: "identity-mount"},
	{dir: "operations/database-ca-mount", mode: Committed, want: "database-ca-mount"},
	{dir: "operations/resources", mode: Committed, want: "resources"},
	{dir: "operations/limits", mode: Committed, want: "limits"},
	{dir: "operations/quotas", mode: Committed, want: "quotas"},
	{dir: "operations/profile", mode: Committed, want: "profile"},
	{dir: "operations/absolute-paths", mode: Committed, want: "absolute-paths"},
	{dir: "operations/database-tls", mode: Committed, want: "database-tls"},
	{dir: "operations/database-secrets", mode: Committed, want: "database-secrets"},
	{dir: "operations/credentials", mode: Committed, want: "credentials"},
	{dir: "operations/kubernetes-token", mode: Committed, want: "kubernetes-token"},
	{dir: "operations/image-digest", mode: Committed, want: "image-digest"},
	{dir: "operations/image-digest-volume", mode: Committed, want: "image-digest"},
	// The placeholder rule both ways: a released digest is wrong in the
	// committed tree, the placeholder is wrong in a deployable one.
	{dir: "operations/clean-deployable", mode: Committed, want: "admin-image-placeholder"},
	{dir: "operations/clean", mode: Deployable, want: "admin-image-placeholder"},
	{dir: "operations/management-switch", mode: Deployable, want: "management-switch"},
	{dir: "operations/example-in-kustomization", mode: Committed, want: "example-in-kustomization"},
	{dir: "repos/clean/operations/plugin-package-management", repo: "repos/clean", mode: Committed},
	{dir: "repos/referenced/operations/plugin-package-management", repo: "repos/referenced", mode: Committed, want: "operation-referenced"},
	{dir: "repos/example/operations/plugin-package-management", repo: "repos/example", mode: Committed, want: "example-in-kustomization"},
}

func audit(t *testing.T, dir, repo string, mode Mode) *Report {
	t.Helper()
	opts := Options{Mode: mode}
	if repo != "" {
		opts.RepoRoot = filepath.Join("testdata", repo)
	}
	r, err := Audit(filesys.MakeFsOnDisk(), filepath.Join("testdata", dir), opts)
	if err != nil {
		t.Fatalf("audit %s: %v", dir, err)
	}
	return r
}

// Every fixture yields exactly its one finding, the clean ones none.
func TestFixtures(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(string(fx.mode)+"/"+fx.dir, func(t *testing.T) {
			r := audit(t, fx.dir, fx.repo, fx.mode)
			var got []string
			for _, f := range r.Findings {
				got = append(got, f.Rule)
			}
			var want []string
			if fx.want != "" {
				want = []string{fx.want}
			}
			if !slices.Equal(got, want) {
				b, _ := json.MarshalIndent(r.Findings, "", "  ")
				t.Fatalf("findings %q, want %q:\n%s", got, want, b)
			}
			shape := fx.shape
			if shape == "" {
				shape = Production
			}
			if r.Shape != shape {
				t.Errorf("shape %q, want %q", r.Shape, shape)
			}
			for _, f := range r.Findings {
				t.Logf("%s %v %s %s: expected %s, found %s", f.Rule, f.Object, f.File, f.Path, f.Expected, f.Found)
				if (f.Object == nil) == (f.File == "") || f.Expected == "" || f.Found == "" {
					t.Errorf("finding %+v must name an object or a file, and what was expected and found", f)
				}
			}
		})
	}
}

// Every rule has a fixture that violates it, and nothing but the fixtures'
// rules is in the table.
func TestEveryRuleHasAFixture(t *testing.T) {
	covered := map[string]bool{}
	for _, fx := range fixtures {
		covered[fx.want] = true
	}
	for _, r := range Rules() {
		if !covered[r.Name] {
			t.Errorf("rule %q has no fixture", r.Name)
		}
	}
	dirs, err := os.ReadDir(filepath.Join("testdata", "operations"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !slices.ContainsFunc(fixtures, func(fx struct {
			dir, repo string
			mode      Mode
			want      string
			shape     Shape
		}) bool {
			return fx.dir == "operations/"+d.Name()
		}) {
			t.Errorf("fixture directory %q is in no test", d.Name())
		}
	}
}

// A single-replica development patch is named as such in the finding.
func TestDevelopmentShapeIsNamed(t *testing.T) {
	r := audit(t, "operations/development-single-replica", "", Committed)
	if len(r.Findings) != 1 || !strings.Contains(r.Findings[0].Found, "development") {
		t.Fatalf("findings %+v: want one replicas finding naming the development shape", r.Findings)
	}
}

// Rules that need the repository or another mode are listed as not checked.
func TestNotChecked(t *testing.T) {
	r := audit(t, "operations/clean", "", Committed)
	if want := []string{"management-switch", "operation-referenced"}; !slices.Equal(r.NotChecked, want) {
		t.Errorf("notChecked %q, want %q", r.NotChecked, want)
	}
	if len(r.Checked)+len(r.NotChecked) != len(Rules()) {
		t.Errorf("checked %d + not checked %d != %d rules", len(r.Checked), len(r.NotChecked), len(Rules()))
	}
	r = audit(t, "repos/clean/operations/plugin-package-management", "repos/clean", Deployable)
	if want := []string{"operation-referenced"}; !slices.Equal(r.NotChecked, want) {
		t.Errorf("deployable notChecked %q, want %q", r.NotChecked, want)
	}
}

func TestAuditErrors(t *testing.T) {
	tmp := t.TempDir()
	for _, tc := range []struct {
		name, dir string
		opts      Options
		want      string
	}{
		{"no kustomization", tmp, Options{}, "has no kustomization"},
		{"bad mode", "testdata/operations/clean", Options{Mode: "staging"}, `audit mode "staging"`},
		{"repo root elsewhere", "testdata/operations/clean", Options{RepoRoot: tmp}, "is not inside --repo-root"},
		{"repo root missing", "testdata/operations/clean", Options{RepoRoot: filepath.Join(tmp, "nope")}, "--repo-root"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Audit(filesys.MakeFsOnDisk(), tc.dir, tc.opts)
			if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v (class %v), want invalid containing %q", err, fail.ClassOf(err), tc.want)
			}
		})
	}
}

// A malformed kustomization anywhere under --repo-root stops the audit and
// is named.
func TestRepoBadKustomization(t *testing.T) {
	fsys := filesys.MakeFsInMemory()
	write := func(p, s string) {
		if err := fsys.WriteFile(p, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	write("/repo/op/kustomization.yaml", "resources: [cm.yaml]\n")
	write("/repo/op/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: b}\n")
	write("/repo/other/kustomization.yaml", "resources: {not: a list}\n")
	_, err := Audit(fsys, "/repo/op", Options{RepoRoot: "/repo"})
	if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), `kustomization "other/kustomization.yaml"`) {
		t.Fatalf("err = %v, want invalid naming other/kustomization.yaml", err)
	}
}

// A kustomization under a dot-directory of the checkout (.deploy/) that
// includes the operation is found: only .git is not read. Before, every
// directory whose name starts with "." was skipped, and the audit said
// nothing references the operation.
func TestRepoDotDirectoryReference(t *testing.T) {
	fsys := inMemory(t, map[string]string{
		"/repo/op/kustomization.yaml":             "resources: [cm.yaml]\n",
		"/repo/op/cm.yaml":                        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: b}\n",
		"/repo/.deploy/prod/kustomization.yaml":   "resources: [../../op]\n",
		"/repo/.git/modules/x/kustomization.yaml": "resources: {not: a list}\n",
	})
	r, err := Audit(fsys, "/repo/op", Options{RepoRoot: "/repo"})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range r.Findings {
		if f.File == ".deploy/prod/kustomization.yaml" && f.Expected == "no reference to the opt-in operation" {
			return
		}
	}
	t.Fatalf("findings %+v: want .deploy/prod/kustomization.yaml's reference to the operation", r.Findings)
}

// inMemory writes files into an in-memory file system.
func inMemory(t *testing.T, files map[string]string) filesys.FileSystem {
	t.Helper()
	fsys := filesys.MakeFsInMemory()
	for p, s := range files {
		if err := fsys.WriteFile(p, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	return fsys
}

// Without a Deployment, only the deployment rule has something to say.
func TestNoDeployment(t *testing.T) {
	fsys := inMemory(t, map[string]string{
		"/op/kustomization.yaml": "resources: [cm.yaml]\n",
		"/op/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: b}\n",
	})
	r, err := Audit(fsys, "/op", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Findings) != 1 || r.Findings[0].Rule != "deployment" || r.Shape != Unknown {
		t.Fatalf("shape %q, findings %+v: want one deployment finding, shape unknown", r.Shape, r.Findings)
	}
}

// A bare Deployment violates nearly every rule; each finding names its
// field, and the unset replica count is the development shape.
func TestBareDeployment(t *testing.T) {
	fsys := inMemory(t, map[string]string{
		"/op/kustomization.yaml": "namespace: ns\nresources: [d.yaml]\n",
		"/op/d.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: m}
spec:
  selector: {matchLabels: {app: m}}
  template:
    metadata: {labels: {app: m}}
    spec:
      containers:
        - name: management
          image: registry.example.com/admin:1
`,
	})
	r, err := Audit(fsys, "/op", Options{Mode: Deployable})
	if err != nil {
		t.Fatal(err)
	}
	if r.Shape != Development {
		t.Errorf("shape %q, want %q", r.Shape, Development)
	}
	fired := map[string]bool{}
	for _, f := range r.Findings {
		fired[f.Rule] = true
		if f.Object == nil || f.Path == "" {
			t.Errorf("finding %+v lacks its object or path", f)
		}
	}
	quiet := []string{"deployment", "anti-affinity", "pdb-min-available", "rbac", "limits", "quotas", "credentials", "kubernetes-token", "admin-image-placeholder", "example-in-kustomization"}
	for _, ru := range Rules() {
		if ru.NeedsRepo {
			continue
		}
		if want := !slices.Contains(quiet, ru.Name); fired[ru.Name] != want {
			t.Errorf("rule %q fired %t, want %t", ru.Name, fired[ru.Name], want)
		}
	}
}
