package plugin_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/qinglong/kubectl-ql3/inventory"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// fixtures are the example releases under testdata/releases.
var fixtures = []string{"v3.0.0", "v3.1.0", "v3.1.1", "v3.1.0-drop"}

func fixtureDir(name string) string { return filepath.Join("..", "testdata", "releases", name) }

// golden compares got with testdata/golden/<name>, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("..", "testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (regenerate with: go test ./plugin/ -run Golden -update)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

// runOK runs the plugin and fails unless it exits 0.
func runOK(t *testing.T, args ...string) (string, string) {
	t.Helper()
	out, stderr, code := run(t, nil, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d\n%s", args, code, stderr)
	}
	return out, stderr
}

func TestRenderGolden(t *testing.T) {
	for _, f := range fixtures {
		t.Run(f, func(t *testing.T) {
			out, _ := runOK(t, "render", fixtureDir(f))
			golden(t, f+"/render.txt", out)
			out, _ = runOK(t, "render", fixtureDir(f), "-o", "yaml")
			golden(t, f+"/render.yaml", out)
			out, _ = runOK(t, "render", fixtureDir(f), "--inventory")
			golden(t, f+"/inventory.yaml", out)
		})
	}
}

func TestRenderJSON(t *testing.T) {
	out, _ := runOK(t, "render", fixtureDir("v3.0.0"), "-o", "json")
	var list struct {
		Kind  string           `json:"kind"`
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || list.Kind != "List" {
		t.Fatalf("not a List: %v\n%s", err, out)
	}
	inv, _ := runOK(t, "render", fixtureDir("v3.0.0"), "--inventory", "-o", "json")
	var report struct {
		Render struct {
			Digest string `json:"digest"`
		} `json:"render"`
	}
	if err := json.Unmarshal([]byte(inv), &report); err != nil {
		t.Fatal(err)
	}
	// The render digest is recomputable from the printed objects.
	if d, _ := inventory.DigestOf(inventory.DomainRender, list.Items); d != report.Render.Digest {
		t.Errorf("digest of -o json items %s, --inventory says %s", d, report.Render.Digest)
	}
}

func TestRenderErrors(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		stderr []string
	}{
		{"no dir", []string{"render"}, []string{"accepts 1 arg(s), received 0"}},
		{"bad output", []string{"render", fixtureDir("v3.0.0"), "-o", "wide"}, []string{`--output "wide" is not supported`}},
		{"key without allow", []string{"render", fixtureDir("v3.0.0"), "--secret-digest-key-file", "x"}, []string{"--secret-digest-key-file requires --allow-secret-data"}},
		{"not a release", []string{"render", "."}, []string{`release "." has no kustomization`}},
		{"missing dir", []string{"render", "no/such/dir"}, []string{`release "no/such/dir"`}},
		{"missing key file", []string{"render", fixtureDir("v3.0.0"), "--allow-secret-data", "--secret-digest-key-file", "no/such/key"}, []string{"--secret-digest-key-file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, stderr, code := run(t, nil, tt.args...)
			if code != 2 || out != "" {
				t.Fatalf("exit %d, want 2 (invalid); stdout %q; stderr %q", code, out, stderr)
			}
			for _, w := range tt.stderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not mention %q:\n%s", w, stderr)
				}
			}
		})
	}
}
