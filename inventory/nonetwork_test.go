package inventory

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// No reference in a kustomization makes a render run git, whatever
// checkLocal recognises: the release's kustomize refuses to clone
// (third_party/kustomize-api, ql3-local.patch). Each case is a reference
// kustomize takes for a git repository that checkLocal does not call
// remote (a generators or transformers entry, which it does not look up; a
// base that a local file of that name lets through); a git first on PATH
// that records its calls is the witness. Before the patch the render ran
// `git init` and `git fetch` for each of them, with the network.
func TestRenderNeverRunsGit(t *testing.T) {
	bin := t.TempDir()
	calls := filepath.Join(bin, "calls")
	script := "#!/bin/sh\necho \"$@\" >> " + calls + "\nexit 0\n"
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	for _, c := range []struct {
		name string
		edit func(files map[string]string)
		want string
	}{
		{"a generators entry that is a repository", func(f map[string]string) {
			f["/rel/kustomization.yaml"] += "generators:\n- github.com/example/repo\n"
		}, `"github.com/example/repo" is a git repository reference`},
		{"a transformers entry that is a repository", func(f map[string]string) {
			f["/rel/kustomization.yaml"] += "transformers:\n- github.com/example/repo//deploy?ref=v1\n"
		}, `is a git repository reference`},
		{"a base whose name is also a local file", func(f map[string]string) {
			f["/rel/github.com/example/repo"] = "a: [\n"
			f["/rel/kustomization.yaml"] += "- github.com/example/repo\n"
		}, `MalformedYAMLError: yaml: line 1: did not find expected node content in File: github.com/example/repo`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_ = os.Remove(calls)
			files := minimalRelease()
			c.edit(files)
			_, err := Render(memFS(t, files), "/rel", Options{})
			wantInvalid(t, err, c.want)
			if data, err := os.ReadFile(calls); err == nil {
				t.Fatalf("the render ran git: %s", strings.TrimSpace(string(data)))
			}
		})
	}
}
