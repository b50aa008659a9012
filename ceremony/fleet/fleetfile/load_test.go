package fleetfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
)

// fleetDir lays out goodYAML's fleet on disk: the fleet file, the two
// kubeconfigs and the three release directories; it returns the file.
func fleetDir(t *testing.T, yaml string) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"kubeconfigs", "releases/dev", "releases/staging", "releases/prod"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"kubeconfigs/dev.yaml", "kubeconfigs/stg.yaml"} {
		testkit.WriteFile(t, filepath.Join(dir, k), []byte("apiVersion: v1\nkind: Config\n"), 0o600)
	}
	return testkit.WriteFile(t, filepath.Join(dir, "fleet.yaml"), []byte(yaml), 0o644)
}

func TestLoad(t *testing.T) {
	path := fleetDir(t, goodYAML)
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Dir != filepath.Dir(path) || f.Path("releases/dev") != filepath.Join(filepath.Dir(path), "releases", "dev") {
		t.Fatalf("Dir %q", f.Dir)
	}
	inMemory, err := Parse(f.Dir, []byte(goodYAML))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := f.Digest()
	b, _ := inMemory.Digest()
	if a != b {
		t.Fatalf("Load and Parse resolve differently: %s %s", a, b)
	}
}

// A link inside the fleet's directory is followed; one that leads out of
// it is refused, as are missing paths and paths of the wrong type.
func TestLoadPaths(t *testing.T) {
	outside := t.TempDir()
	testkit.WriteFile(t, filepath.Join(outside, "admin.yaml"), []byte("kind: Config\n"), 0o600)
	if err := os.Mkdir(filepath.Join(outside, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		setup func(dir string) error
		want  string // "" accepts
	}{
		{"link inside", func(dir string) error {
			os.Remove(filepath.Join(dir, "kubeconfigs/dev.yaml"))
			return os.Symlink("stg.yaml", filepath.Join(dir, "kubeconfigs/dev.yaml"))
		}, ""},
		{"kubeconfig link outside", func(dir string) error {
			os.Remove(filepath.Join(dir, "kubeconfigs/dev.yaml"))
			return os.Symlink(filepath.Join(outside, "admin.yaml"), filepath.Join(dir, "kubeconfigs/dev.yaml"))
		}, "targets[0].kubeconfig: " + "DIR/kubeconfigs/dev.yaml leads, through a symbolic link, to " + outside + "/admin.yaml, which is not inside the fleet file's directory DIR"},
		{"release directory link outside", func(dir string) error {
			os.RemoveAll(filepath.Join(dir, "releases"))
			return os.Symlink(outside, filepath.Join(dir, "releases"))
		}, "targets[0].release: DIR/releases/dev leads, through a symbolic link, to " + outside + "/dev"},
		{"release link to the fleet directory", func(dir string) error {
			os.RemoveAll(filepath.Join(dir, "releases/prod"))
			return os.Symlink("..", filepath.Join(dir, "releases/prod"))
		}, "targets[2].release: DIR/releases/prod leads, through a symbolic link, to DIR, which is not inside"},
		{"kubeconfig missing", func(dir string) error {
			return os.Remove(filepath.Join(dir, "kubeconfigs/stg.yaml"))
		}, "targets[1].kubeconfig: DIR/kubeconfigs/stg.yaml does not exist; want a regular file"},
		{"release a file", func(dir string) error {
			os.RemoveAll(filepath.Join(dir, "releases/staging"))
			return os.WriteFile(filepath.Join(dir, "releases/staging"), nil, 0o644)
		}, "targets[1].release: DIR/releases/staging is not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := fleetDir(t, goodYAML)
			dir := filepath.Dir(path)
			if err := tc.setup(dir); err != nil {
				t.Fatal(err)
			}
			_, err := Load(path)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			want := strings.ReplaceAll(tc.want, "DIR", dir)
			if !fail.Is(err, fail.Invalid) || !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), want) {
				t.Fatalf("got %v, want exit 2 with %q", err, want)
			}
		})
	}
}

// The fleet file itself is read like every file that decides what the
// tool trusts: not group or world writable, not a symbolic link.
func TestLoadHardenedRead(t *testing.T) {
	path := fleetDir(t, goodYAML)
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), "fleet file: ") {
		t.Fatalf("a world-writable fleet file: %v", err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(filepath.Dir(path), "link.yaml")
	if err := os.Symlink("fleet.yaml", link); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(link); !fail.Is(err, fail.Invalid) {
		t.Fatalf("a fleet file that is a symbolic link: %v", err)
	}
	bad := fleetDir(t, strings.Replace(goodYAML, "{names: [dev-a]}", "{names: [dev-a, prod-x]}", 1))
	if _, err := Load(bad); !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), bad+`: waves[0].selector.names[1]: "prod-x" is no target`) {
		t.Fatalf("a rule broken: %v", err)
	}
}

// The digest covers the resolved fleet: not where it lies, nor how a
// selector was written, but every value a target or wave resolves to.
func TestDigest(t *testing.T) {
	digest := func(dir, yaml string) string {
		t.Helper()
		f, err := Parse(dir, []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		d, err := f.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	base := digest("/fleet", goodYAML)
	if got := digest("/elsewhere", goodYAML); got != base {
		t.Error("the digest depends on the directory")
	}
	same := strings.Replace(goodYAML, "{matchLabels: {ring: prod}}", "{names: [prod-b, prod-a]}", 1)
	same = strings.Replace(same, "  soak: 10m\n", "  soak: 600s\n", 1)
	same = strings.Replace(same, "- name: dev\n  selector: {names: [dev-a]}\n", "- name: dev\n  selector: {names: [dev-a]}\n  maxParallel: 1\n  gate: auto\n", 1)
	if got := digest("/fleet", same); got != base {
		t.Error("the digest depends on how selectors, soaks and defaults are written")
	}
	for _, edit := range [][2]string{{"soak: 10m", "soak: 11m"}, {"maxFailures: 1", "maxFailures: 0"}, {"gate: approval", "gate: auto"},
		{"region: us", "region: ca"}, {"context: prod-b", "context: prod-c"}, {"release: releases/dev", "release: releases/staging"}} {
		if got := digest("/fleet", strings.Replace(goodYAML, edit[0], edit[1], 1)); got == base {
			t.Errorf("the digest does not cover %s", edit[0])
		}
	}
	split := strings.Replace(goodYAML, "  selector: {matchLabels: {ring: prod}}\n", "  selector: {names: [prod-a]}\n", 1) +
		"- name: prod-2\n  selector: {names: [prod-b]}\n"
	if got := digest("/fleet", split); got == base {
		t.Error("the digest does not cover which wave holds a target")
	}
}
