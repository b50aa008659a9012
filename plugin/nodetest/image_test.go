package nodetest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/internal/ociarchive"
	"github.com/qinglong/kubectl-ql3/internal/testkit"
)

// release is what goreleaser's "image" build wrote for this machine: the
// linux binary (which the host runs as the operator's kubectl-ql3: lock,
// rbac, head, receipt audit) and the image, imported into the node.
type release struct {
	binary  string // dist/image_linux_<arch>*/kubectl-ql3
	image   string // ql3.local/kubectl-ql3:v<version>@sha256:…, as imported
	version string // v<version>, the binary's
	home    string // the host runs' XDG_CACHE_HOME and XDG_CONFIG_HOME
}

// buildImage runs goreleaser (bin/tools, `make tools`) on .goreleaser.yaml
// with only its dist changed: `goreleaser build --snapshot --single-target
// --id image`, the build whose post hook writes the image archive.
func buildImage(t *testing.T) release {
	t.Helper()
	root, err := testkit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	goreleaser := filepath.Join(root, "bin", "tools", "goreleaser")
	if _, err := os.Stat(goreleaser); err != nil {
		t.Fatalf("%s is missing: run `make tools` (`make test` builds the pinned tools into bin/tools)", goreleaser)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(mustRead(t, filepath.Join(root, ".goreleaser.yaml")), &cfg); err != nil {
		t.Fatalf(".goreleaser.yaml: %v", err)
	}
	tmp := t.TempDir()
	dist := filepath.Join(tmp, "dist")
	cfg["dist"] = dist
	config := filepath.Join(tmp, "goreleaser.yaml")
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testkit.WriteFile(t, config, b, 0o644)
	start := time.Now()
	cmd := exec.Command(goreleaser, "build", "--snapshot", "--clean", "--single-target", "--id", "image", "--config", config)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("goreleaser build: %v\n%s", err, out)
	}
	t.Logf("goreleaser build --snapshot --single-target --id image took %s", time.Since(start).Round(time.Millisecond))
	var meta struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(dist, "metadata.json")), &meta); err != nil {
		t.Fatal(err)
	}
	rel := release{version: "v" + meta.Version, home: t.TempDir()}
	rel.binary = glob(t, filepath.Join(dist, "image_linux_*", "kubectl-ql3"))
	archive := glob(t, filepath.Join(dist, "kubectl-ql3_*_linux_*.oci.tar"))
	images, err := ociarchive.Read(archive)
	if err != nil {
		t.Fatal(err)
	}
	if want := "ql3.local/kubectl-ql3:" + rel.version; len(images) == 0 || images[0].Name != want {
		t.Fatalf("%s: first image is not %s", archive, want)
	}
	rel.image = images[0].Name + "@" + images[0].Digest
	if err := cp.ImportImage(archive); err != nil {
		t.Fatal(err)
	}
	return rel
}

// ql3 runs the release's binary on the host as the cluster admin and
// returns stdout; it fails t unless the exit code is want.
func (r release) ql3(t *testing.T, want int, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(r.binary, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.AdminKubeconfig,
		"XDG_CACHE_HOME="+filepath.Join(r.home, "cache"), "XDG_CONFIG_HOME="+filepath.Join(r.home, "config"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); cmd.ProcessState == nil {
		t.Fatal(err) // it did not start
	}
	if code := cmd.ProcessState.ExitCode(); code != want {
		t.Fatalf("kubectl-ql3 %v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, code, want, out.String(), errb.String())
	}
	return out.Bytes()
}

// kubectl runs the control plane's kubectl as the admin, stdin given.
func kubectl(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(filepath.Join(cp.BinDir, "kubectl"), append([]string{"--kubeconfig", cp.AdminKubeconfig}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return out
}

// glob is the one file matching pattern.
func glob(t *testing.T, pattern string) string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil || len(m) != 1 {
		t.Fatalf("%s: %d matches (%v), want 1", pattern, len(m), err)
	}
	return m[0]
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return b
}
