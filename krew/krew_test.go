package krew_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/qinglong/kubectl-ql3/internal/ociarchive"
	"github.com/qinglong/kubectl-ql3/internal/testcluster"
)

var cp *testcluster.ControlPlane

func TestMain(m *testing.M) { testcluster.Main(m, testcluster.Options{}, &cp) }

const (
	pluginName = "ql3"
	binName    = "kubectl-ql3"
	// kubeVersion is the version of the test control plane's kube-apiserver.
	kubeVersion = "v1.37.2"
)

// readmeCommands are the commands of README.md's "## Install" section that
// the tests below run (with real file names and directories).
var readmeCommands = []string{
	"kubectl krew install --manifest=ql3.yaml --archive=kubectl-ql3_",
	"kubectl krew uninstall ql3",
	"sha256sum --ignore-missing -c checksums.txt",
	"tar -xzf kubectl-ql3_",
	"kubectl ql3 version",
	"source <(kubectl-ql3 completion bash)",
	"kubectl-ql3 completion zsh",
	"kubectl-ql3 completion fish",
	"kubectl-ql3 completion powershell",
	"kubectl_complete-ql3",
	`exec kubectl-ql3 __complete "$@"`,
}

// TestREADMEInstall keeps README.md's install instructions the ones the
// tests below execute.
func TestREADMEInstall(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Install\n")
	if !ok {
		t.Fatal(`README.md has no "## Install" section`)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	for _, c := range readmeCommands {
		if !strings.Contains(section, c) {
			t.Errorf("README.md's Install section lacks %q, which the krew tests run", c)
		}
	}
}

// TestGoreleaserCheck runs `goreleaser check` on .goreleaser.yaml.
func TestGoreleaserCheck(t *testing.T) {
	run(t, repoRoot(t), nil, tool(t, "goreleaser"), "check")
}

// TestRelease builds a goreleaser snapshot release for this machine's
// platform and checks what a user gets from it: the archive, checksums.txt,
// the Krew manifest in step with krew/ql3.yaml and .krew.yaml and accepted by
// krew's validator, and a real `kubectl krew install` that the real kubectl
// runs against the local control plane.
func TestRelease(t *testing.T) {
	root := repoRoot(t)
	validate := tool(t, "validate-krew-manifest")
	krewBin := tool(t, "krew")
	rel := snapshot(t)

	tmpl := readManifest(t, filepath.Join(root, "krew", pluginName+".yaml"))
	generated := readManifest(t, rel.manifest)

	t.Run("archive", func(t *testing.T) {
		files := untarGz(t, rel.archive)
		if got, want := slices.Sorted(maps.Keys(files)), []string{"LICENSE", binName}; !slices.Equal(got, want) {
			t.Errorf("%s holds %v, want %v", filepath.Base(rel.archive), got, want)
		}
		license, err := os.ReadFile(filepath.Join(root, "LICENSE"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(files["LICENSE"], license) {
			t.Errorf("LICENSE in %s differs from the repository's", filepath.Base(rel.archive))
		}
		sum := sha256.Sum256(mustRead(t, rel.archive))
		if got, want := rel.checksums[filepath.Base(rel.archive)], hex.EncodeToString(sum[:]); got != want {
			t.Errorf("checksums.txt has %q for %s, want %q", got, filepath.Base(rel.archive), want)
		}
		p := platformFor(t, generated, runtime.GOOS, runtime.GOARCH)
		if p.Sha256 != rel.checksums[filepath.Base(rel.archive)] {
			t.Errorf("generated manifest has sha256 %q for %s/%s, checksums.txt %q", p.Sha256, runtime.GOOS, runtime.GOARCH, rel.checksums[filepath.Base(rel.archive)])
		}
		if want := "v" + rel.meta.Version; generated.Spec.Version != want {
			t.Errorf("generated manifest has spec.version %q, want %q", generated.Spec.Version, want)
		}
	})

	t.Run("template in step with goreleaser", func(t *testing.T) {
		want, got := normalize(t, "krew/ql3.yaml", tmpl), normalize(t, "generated ql3.yaml", generated)
		// The snapshot is built for this platform only: compare its
		// platforms, and the template's platforms with the build targets
		// of .goreleaser.yaml.
		want.Spec.Platforms = slices.DeleteFunc(want.Spec.Platforms, func(p platform) bool {
			return !slices.ContainsFunc(got.Spec.Platforms, func(q platform) bool { return samePlatform(p, q) })
		})
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("krew/ql3.yaml is not in step with the manifest goreleaser generates (-krew/ql3.yaml +generated):\n%s", diff)
		}
		var listed []string
		for _, p := range normalize(t, "krew/ql3.yaml", tmpl).Spec.Platforms {
			listed = append(listed, p.target())
		}
		if diff := cmp.Diff(goreleaserTargets(t), listed); diff != "" {
			t.Errorf("krew/ql3.yaml's platforms differ from .goreleaser.yaml's targets (-goreleaser +krew/ql3.yaml):\n%s", diff)
		}
	})

	t.Run(".krew.yaml in step with the template", func(t *testing.T) {
		rendered := filepath.Join(t.TempDir(), pluginName+".yaml")
		if err := os.WriteFile(rendered, renderReleaseBot(t, rel), 0o644); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(normalize(t, "krew/ql3.yaml", tmpl), normalize(t, ".krew.yaml", readManifest(t, rendered))); diff != "" {
			t.Errorf(".krew.yaml renders to a manifest not in step with krew/ql3.yaml (-krew/ql3.yaml +.krew.yaml):\n%s", diff)
		}
		validateManifest(t, validate, rendered)
	})

	t.Run("validate-krew-manifest accepts it", func(t *testing.T) {
		validateManifest(t, validate, rel.manifest)
	})

	t.Run("krew install, kubectl ql3, krew uninstall", func(t *testing.T) {
		testKrewInstall(t, krewBin, rel, generated.Spec.Version)
	})

	t.Run("release archive by hand", func(t *testing.T) {
		// README: verify against checksums.txt, untar kubectl-ql3, put it
		// on PATH; shell completion.
		run(t, rel.dist, nil, "sha256sum", "--ignore-missing", "-c", "checksums.txt")
		dir := t.TempDir()
		run(t, dir, nil, "tar", "-xzf", rel.archive, binName)
		env := []string{"PATH=" + dir + string(os.PathListSeparator) + "/usr/bin:/bin", "HOME=" + t.TempDir()}
		out := run(t, "", env, filepath.Join(cp.BinDir, "kubectl"), "ql3", "version", "--client")
		if want := "Plugin Version: " + generated.Spec.Version + "\n"; out != want {
			t.Errorf("kubectl ql3 version --client printed %q, want %q", out, want)
		}
		// The released binary carries no crash hook (internal/crashpoint
		// compiles to a no-op without the ql3crash build tag).
		info := run(t, "", nil, "go", "version", "-m", filepath.Join(dir, binName))
		if strings.Contains(info, "ql3crash") || !strings.Contains(info, "\tbuild\t") {
			t.Errorf("released binary's build info mentions the ql3crash tag (or has no build settings):\n%s", info)
		}
		for _, shell := range []string{"zsh", "fish", "powershell"} {
			if out := run(t, "", env, filepath.Join(dir, binName), "completion", shell); !strings.Contains(out, binName) {
				t.Errorf("kubectl-ql3 completion %s printed no completion script for kubectl-ql3:\n%s", shell, out)
			}
		}
		if out := run(t, "", env, "bash", "-c", "source <(kubectl-ql3 completion bash) && complete -p kubectl-ql3"); !strings.Contains(out, "kubectl-ql3") {
			t.Errorf("bash has no completion for kubectl-ql3 after sourcing it: %q", out)
		}
	})

	if runtime.GOOS != "linux" {
		return // the image is built for linux only
	}
	t.Run("container image", func(t *testing.T) {
		// The "image" build's post hook (hack/imagearchive) wrote the
		// image next to the archives; its /kubectl-ql3 is the archive's
		// binary, byte for byte.
		path := filepath.Join(rel.dist, fmt.Sprintf("%s_%s_linux_%s.oci.tar", binName, rel.meta.Tag, runtime.GOARCH))
		images, err := ociarchive.Read(path)
		if err != nil {
			t.Fatalf("goreleaser did not write the image: %v", err)
		}
		if want := "ql3.local/kubectl-ql3:v" + rel.meta.Version; len(images) != 2 || images[0].Name != want {
			t.Fatalf("%s names %d images, the first %q; want 2, the first %q", filepath.Base(path), len(images), images[0].Name, want)
		}
		if !bytes.Equal(images[0].Files[binName], untarGz(t, rel.archive)[binName]) {
			t.Errorf("the image's /%s differs from the one in %s", binName, filepath.Base(rel.archive))
		}
		if u, e := images[0].Config["User"], images[0].Config["Entrypoint"]; u != "65532:65532" || fmt.Sprint(e) != "[/"+binName+"]" {
			t.Errorf("image runs %v as %v, want [/%s] as 65532:65532", e, u, binName)
		}
	})
}

// testKrewInstall is README's Krew install, run by the real kubectl with
// krew on PATH as the kubectl-krew plugin, offline (--manifest and
// --archive never touch the index or the network), in a fresh KREW_ROOT
// and HOME.
func testKrewInstall(t *testing.T, krewBin string, rel release, version string) {
	kubectl := filepath.Join(cp.BinDir, "kubectl")
	krewRoot, home, shims := t.TempDir(), t.TempDir(), t.TempDir()
	binDir := filepath.Join(krewRoot, "bin")
	if err := os.Symlink(krewBin, filepath.Join(shims, "kubectl-krew")); err != nil {
		t.Fatal(err)
	}
	// README's kubectl plugin completion executable.
	if err := os.WriteFile(filepath.Join(shims, "kubectl_complete-ql3"),
		[]byte("#!/bin/sh\nexec kubectl-ql3 __complete \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// `krew uninstall` (and list) refuse to run until the local index is
	// initialised ("krew local plugin index is not initialized"); krew
	// only checks that index/<name>/.git exists, so an empty local git
	// repository stands in for `kubectl krew update`, which needs the
	// network. Install with --manifest does not need it.
	run(t, "", nil, "git", "init", "-q", filepath.Join(krewRoot, "index", "default"))

	env := []string{
		"HOME=" + home,
		"KREW_ROOT=" + krewRoot,
		// A `go install`ed krew is a development build and never checks
		// for upgrades; a tagged one would, 40% of the time, on GitHub.
		"KREW_NO_UPGRADE_CHECK=1",
		"KUBECONFIG=" + cp.AdminKubeconfig,
		"PATH=" + strings.Join([]string{binDir, shims, "/usr/bin", "/bin"}, string(os.PathListSeparator)),
	}
	kube := func(args ...string) string { t.Helper(); return run(t, "", env, kubectl, args...) }

	start := time.Now()
	kube("krew", "install", "--manifest="+rel.manifest, "--archive="+rel.archive)
	t.Logf("krew install took %s", time.Since(start).Round(time.Millisecond))

	installed := filepath.Join(binDir, binName)
	if list := kube("plugin", "list"); !slices.Contains(strings.Split(list, "\n"), installed) {
		t.Errorf("kubectl plugin list does not list %s:\n%s", installed, list)
	}
	// A plugin installed from --manifest belongs to no index: "detached".
	if list := kube("krew", "list"); !slices.Contains(strings.Split(list, "\n"), "detached/"+pluginName) {
		t.Errorf("kubectl krew list does not list detached/%s:\n%s", pluginName, list)
	}

	if out := kube("ql3", "version"); !strings.Contains(out, "Server Version: "+kubeVersion+"\n") ||
		!strings.Contains(out, "Plugin Version: "+version+"\n") {
		t.Errorf("kubectl ql3 version printed:\n%s\nwant Plugin Version %s and Server Version %s", out, version, kubeVersion)
	}
	var info struct {
		Plugin struct {
			Version string `json:"version"`
		} `json:"plugin"`
		Server struct {
			GitVersion string `json:"gitVersion"`
		} `json:"server"`
		ClusterIdentity string `json:"clusterIdentity"`
	}
	if err := json.Unmarshal([]byte(kube("ql3", "version", "-o", "json")), &info); err != nil {
		t.Fatalf("kubectl ql3 version -o json: %v", err)
	}
	if info.Plugin.Version != version || info.Server.GitVersion != kubeVersion || !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(info.ClusterIdentity) {
		t.Errorf("kubectl ql3 version -o json = %+v, want plugin %s, server %s and a cluster identity", info, version, kubeVersion)
	}

	// kubectl >= 1.26 completes plugin arguments through kubectl_complete-<name>.
	if out := kube("__complete", "ql3", ""); !regexp.MustCompile(`(?m)^version\t`).MatchString(out) {
		t.Errorf("kubectl __complete ql3 '' does not offer the version subcommand:\n%s", out)
	}

	kube("krew", "uninstall", pluginName)
	for _, p := range []string{
		installed,
		filepath.Join(krewRoot, "store", pluginName),
		filepath.Join(krewRoot, "receipts", pluginName+".yaml"),
	} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("krew uninstall left %s behind (%v)", p, err)
		}
	}
	if list := kube("plugin", "list"); strings.Contains(list, binName) {
		t.Errorf("kubectl plugin list still lists %s after krew uninstall:\n%s", binName, list)
	}
}

// TestValidateRejects checks that krew's validator rejects the mistakes a
// hand-edited manifest makes, and accepts the template itself.
func TestValidateRejects(t *testing.T) {
	validate := tool(t, "validate-krew-manifest")
	base, err := os.ReadFile(filepath.Join(repoRoot(t), "krew", pluginName+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	platforms := func(m map[string]any) []any { return m["spec"].(map[string]any)["platforms"].([]any) }
	sum := sha256.Sum256([]byte("kubectl-ql3"))
	for _, tc := range []struct {
		name    string
		mutate  func(m map[string]any)
		wantErr string
	}{
		{name: "template as is", mutate: func(map[string]any) {}},
		{
			name: "uppercase sha256",
			mutate: func(m map[string]any) {
				platforms(m)[0].(map[string]any)["sha256"] = strings.ToUpper(hex.EncodeToString(sum[:]))
			},
			wantErr: "`sha256` value",
		},
		{
			name:    "version without leading v",
			mutate:  func(m map[string]any) { m["spec"].(map[string]any)["version"] = "0.1.0" },
			wantErr: "not starting with 'v'",
		},
		{
			name: "overlapping platform selectors",
			mutate: func(m map[string]any) {
				linux := map[string]any{
					"selector": map[string]any{"matchLabels": map[string]any{"os": "linux"}},
					"uri":      "https://github.com/qinglong/kubectl-ql3/releases/download/v0.1.0/kubectl-ql3_v0.1.0_linux.tar.gz",
					"sha256":   hex.EncodeToString(sum[:]),
					"bin":      binName,
				}
				m["spec"].(map[string]any)["platforms"] = append(platforms(m), linux)
			},
			wantErr: "overlapping platform selectors",
		},
		{
			name:    "name other than the file's",
			mutate:  func(m map[string]any) { m["metadata"].(map[string]any)["name"] = "ql4" },
			wantErr: `plugin should be named "ql3"`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m map[string]any
			if err := yaml.Unmarshal(base, &m); err != nil {
				t.Fatal(err)
			}
			tc.mutate(m)
			b, err := yaml.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), pluginName+".yaml")
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := command(t, "", []string{"KREW_ROOT=" + t.TempDir(), "HOME=" + t.TempDir()},
				validate, "-manifest", path, "-skip-install")
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("validate-krew-manifest rejected it: %v\n%s", err, out)
			case tc.wantErr != "" && err == nil:
				t.Errorf("validate-krew-manifest accepted it, want an error with %q\n%s", tc.wantErr, out)
			case tc.wantErr != "" && !strings.Contains(out, tc.wantErr):
				t.Errorf("validate-krew-manifest failed without %q:\n%s", tc.wantErr, out)
			}
		})
	}
}

// release is a goreleaser snapshot in a temporary dist directory.
type release struct {
	dist      string
	archive   string            // this platform's archive
	manifest  string            // dist/krew/ql3.yaml
	checksums map[string]string // checksums.txt: file name -> sha256
	meta      struct {
		Tag     string `json:"tag"`
		Version string `json:"version"`
	}
}

// snapshot runs `goreleaser release --snapshot` with .goreleaser.yaml
// restricted to this machine's GOOS/GOARCH (one target instead of six keeps
// the build short; `make dist` builds them all) and a temporary dist.
// Nothing else in the configuration changes.
func snapshot(t *testing.T) release {
	t.Helper()
	root := repoRoot(t)
	goreleaser := tool(t, "goreleaser")
	var cfg map[string]any
	if err := yaml.Unmarshal(mustRead(t, filepath.Join(root, ".goreleaser.yaml")), &cfg); err != nil {
		t.Fatalf(".goreleaser.yaml: %v", err)
	}
	if runtime.GOOS == "windows" {
		t.Fatal("the release tests run on linux and darwin (tar.gz archives, sh, sha256sum)")
	}
	if !slices.Contains(goreleaserTargets(t), runtime.GOOS+"/"+runtime.GOARCH) {
		t.Fatalf(".goreleaser.yaml does not build for this machine (%s/%s)", runtime.GOOS, runtime.GOARCH)
	}
	// Every build (the archives', the image's) for this platform only; a
	// build that has no target here is left out.
	builds, _ := cfg["builds"].([]any)
	var kept []any
	for _, b := range builds {
		b := b.(map[string]any)
		if slices.Contains(b["goos"].([]any), any(runtime.GOOS)) && slices.Contains(b["goarch"].([]any), any(runtime.GOARCH)) {
			b["goos"], b["goarch"] = []any{runtime.GOOS}, []any{runtime.GOARCH}
			kept = append(kept, b)
		}
	}
	cfg["builds"] = kept
	tmp := t.TempDir()
	rel := release{dist: filepath.Join(tmp, "dist")}
	cfg["dist"] = rel.dist
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(tmp, "goreleaser.yaml")
	if err := os.WriteFile(config, out, 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	run(t, root, nil, goreleaser, "release", "--snapshot", "--clean", "--config", config)
	t.Logf("goreleaser release --snapshot (%s/%s) took %s", runtime.GOOS, runtime.GOARCH, time.Since(start).Round(time.Millisecond))

	if err := json.Unmarshal(mustRead(t, filepath.Join(rel.dist, "metadata.json")), &rel.meta); err != nil {
		t.Fatalf("dist/metadata.json: %v", err)
	}
	rel.archive = filepath.Join(rel.dist, fmt.Sprintf("%s_%s_%s_%s.tar.gz", binName, rel.meta.Tag, runtime.GOOS, runtime.GOARCH))
	rel.manifest = filepath.Join(rel.dist, "krew", pluginName+".yaml")
	for _, p := range []string{rel.archive, rel.manifest} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("goreleaser did not produce %s: %v", p, err)
		}
	}
	rel.checksums = map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(mustRead(t, filepath.Join(rel.dist, "checksums.txt")))), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("checksums.txt: bad line %q", line)
		}
		rel.checksums[name] = sum
	}
	return rel
}

// renderReleaseBot renders .krew.yaml the way krew-release-bot does: Go
// text/template with .TagName, and addURIAndSha, which renders its URL as a
// template and returns "uri: URL\n    sha256: SUM". Archives that the
// snapshot did not build get a stand-in sum.
func renderReleaseBot(t *testing.T, rel release) []byte {
	t.Helper()
	type values struct{ TagName string }
	funcs := template.FuncMap{"addURIAndSha": func(url, tag string) (string, error) {
		var u strings.Builder
		ut, err := template.New("url").Parse(url)
		if err != nil {
			return "", err
		}
		if err := ut.Execute(&u, values{tag}); err != nil {
			return "", err
		}
		sum, ok := rel.checksums[u.String()[strings.LastIndex(u.String(), "/")+1:]]
		if !ok {
			s := sha256.Sum256([]byte(u.String()))
			sum = hex.EncodeToString(s[:])
		}
		return fmt.Sprintf("uri: %s\n    sha256: %s", u.String(), sum), nil
	}}
	tpl, err := template.New(".krew.yaml").Funcs(funcs).Parse(string(mustRead(t, filepath.Join(repoRoot(t), ".krew.yaml"))))
	if err != nil {
		t.Fatalf(".krew.yaml: %v", err)
	}
	var out bytes.Buffer
	if err := tpl.Execute(&out, values{rel.meta.Tag}); err != nil {
		t.Fatalf(".krew.yaml: %v", err)
	}
	return out.Bytes()
}

// Krew manifest, v1alpha2: every field the plugin uses, read strictly so a
// misspelt field fails here (krew itself ignores unknown fields).
type manifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string     `json:"version"`
		Homepage         string     `json:"homepage"`
		ShortDescription string     `json:"shortDescription"`
		Description      string     `json:"description"`
		Caveats          string     `json:"caveats"`
		Platforms        []platform `json:"platforms"`
	} `json:"spec"`
}

type platform struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	URI    string `json:"uri"`
	Sha256 string `json:"sha256"`
	Bin    string `json:"bin"`
	Files  []struct {
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"files,omitempty"`
}

func readManifest(t *testing.T, path string) manifest {
	t.Helper()
	var m manifest
	if err := yaml.UnmarshalStrict(mustRead(t, path), &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

var (
	semverV = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	sha256x = regexp.MustCompile(`^[0-9a-f]{64}$`)
	uriRE   = regexp.MustCompile(`^https://github\.com/qinglong/kubectl-ql3/releases/download/([^/]+)/kubectl-ql3_([^/]+)_([a-z0-9]+)_([a-z0-9]+)\.(tar\.gz|zip)$`)
)

// normalize checks the values that differ between releases (spec.version,
// each platform's uri and sha256) and replaces them with placeholders, and
// sorts the platforms, so two manifests compare structurally.
func normalize(t *testing.T, name string, m manifest) manifest {
	t.Helper()
	if !semverV.MatchString(m.Spec.Version) {
		t.Errorf("%s: spec.version %q is not SemVer with a leading v", name, m.Spec.Version)
	}
	m.Spec.Version = "VERSION"
	ps := slices.Clone(m.Spec.Platforms)
	for i := range ps {
		p := &ps[i]
		goos, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		wantBin, ext := binName, "tar.gz"
		if goos == "windows" {
			wantBin, ext = binName+".exe", "zip"
		}
		if p.Bin != wantBin {
			t.Errorf("%s: %s/%s: bin %q, want %q", name, goos, arch, p.Bin, wantBin)
		}
		if !sha256x.MatchString(p.Sha256) {
			t.Errorf("%s: %s/%s: sha256 %q is not 64 lowercase hex digits", name, goos, arch, p.Sha256)
		}
		p.Sha256 = "SHA256"
		g := uriRE.FindStringSubmatch(p.URI)
		if g == nil || g[1] != g[2] || !semverV.MatchString(g[1]) || g[3] != goos || g[4] != arch || g[5] != ext {
			t.Errorf("%s: %s/%s: uri %q is not the release's kubectl-ql3_<tag>_%s_%s.%s", name, goos, arch, p.URI, goos, arch, ext)
		} else {
			p.URI = strings.ReplaceAll(p.URI, g[1], "TAG")
		}
	}
	slices.SortFunc(ps, func(a, b platform) int { return strings.Compare(a.target(), b.target()) })
	m.Spec.Platforms = ps
	return m
}

// target is a platform's os/arch.
func (p platform) target() string {
	return p.Selector.MatchLabels["os"] + "/" + p.Selector.MatchLabels["arch"]
}

func samePlatform(a, b platform) bool { return a.target() == b.target() }

func platformFor(t *testing.T, m manifest, goos, goarch string) platform {
	t.Helper()
	for _, p := range m.Spec.Platforms {
		if p.Selector.MatchLabels["os"] == goos && p.Selector.MatchLabels["arch"] == goarch {
			return p
		}
	}
	t.Fatalf("manifest has no platform for %s/%s", goos, goarch)
	return platform{}
}

// goreleaserTargets are the sorted os/arch pairs .goreleaser.yaml builds.
func goreleaserTargets(t *testing.T) []string {
	t.Helper()
	var cfg struct {
		Builds []struct {
			ID     string   `json:"id"`
			Goos   []string `json:"goos"`
			Goarch []string `json:"goarch"`
			Ignore []any    `json:"ignore"`
		} `json:"builds"`
	}
	if err := yaml.Unmarshal(mustRead(t, filepath.Join(repoRoot(t), ".goreleaser.yaml")), &cfg); err != nil {
		t.Fatalf(".goreleaser.yaml: %v", err)
	}
	var out []string
	for _, b := range cfg.Builds {
		if b.ID != binName {
			continue // not the archives' build (the image's)
		}
		if len(b.Ignore) > 0 {
			t.Fatal(".goreleaser.yaml: builds[].ignore is not understood by this test")
		}
		for _, goos := range b.Goos {
			for _, arch := range b.Goarch {
				out = append(out, goos+"/"+arch)
			}
		}
	}
	slices.Sort(out)
	return out
}

func validateManifest(t *testing.T, validate, path string) {
	t.Helper()
	if out, err := command(t, "", []string{"KREW_ROOT=" + t.TempDir(), "HOME=" + t.TempDir()},
		validate, "-manifest", path, "-skip-install"); err != nil {
		t.Errorf("validate-krew-manifest -manifest %s: %v\n%s", path, err, out)
	}
}

// repoRoot is the module root (go test runs in krew/).
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".goreleaser.yaml")); err != nil {
		t.Fatalf("no .goreleaser.yaml at the module root %s: %v", root, err)
	}
	return root
}

// tool is a pinned release tool in bin/tools; a missing one fails the test.
func tool(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(repoRoot(t), "bin", "tools", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run `make tools` (`make test` builds the pinned tools into bin/tools)", p)
	}
	return p
}

// newCmd is name with args in dir, with env (NAME=value) added to the
// test's environment less KUBECONFIG and KREW_*, and a 15-minute limit.
func newCmd(dir string, env []string, name string, args ...string) (*exec.Cmd, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = mergeEnv(os.Environ(), env)
	return cmd, cancel
}

// command runs a command and returns its stdout and stderr together.
func command(t testing.TB, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd, cancel := newCmd(dir, env, name, args...)
	defer cancel()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// run runs a command and returns its stdout; a failure fails the test with
// its stderr.
func run(t testing.TB, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd, cancel := newCmd(dir, env, name, args...)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(name), strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// mergeEnv is base without KUBECONFIG, KREW_* and the variables set in
// over, plus over.
func mergeEnv(base, over []string) []string {
	drop := map[string]bool{"KUBECONFIG": true}
	for _, kv := range over {
		k, _, _ := strings.Cut(kv, "=")
		drop[k] = true
	}
	var env []string
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if drop[k] || strings.HasPrefix(k, "KREW_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, over...)
}

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// untarGz returns the regular files of a .tar.gz by name. gzip(1)
// decompresses: compress/flate built with -race takes seconds for the binary.
func untarGz(t *testing.T, path string) map[string][]byte {
	t.Helper()
	cmd, cancel := newCmd("", nil, "gzip", "-dc", path)
	defer cancel()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(pipe)
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if h.Typeflag != tar.TypeReg {
			t.Errorf("%s: %s is not a regular file", path, h.Name)
			continue
		}
		if h.Name == binName && h.Mode&0o111 == 0 {
			t.Errorf("%s: %s is not executable (mode %o)", path, h.Name, h.Mode)
		}
		if files[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("gzip -dc %s: %v\n%s", path, err, stderr.String())
	}
	return files
}
