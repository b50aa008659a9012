package inventory

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// linkedRelease is minimalRelease with a nested base, as relative paths:
// the same files a ConfigMap with an item path "base/app.yaml" holds.
func linkedRelease() map[string]string {
	files := map[string]string{}
	for p, data := range minimalRelease() {
		files[strings.TrimPrefix(p, "/rel/")] = data
	}
	files["base/kustomization.yaml"] = "resources:\n- app.yaml\n"
	files["base/app.yaml"] = files["app.yaml"]
	delete(files, "app.yaml")
	files["kustomization.yaml"] = "namespace: demo\nresources:\n- namespace.yaml\n- base\n"
	return files
}

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, data := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// wantSourcePaths checks the release's source paths, space-separated.
func wantSourcePaths(t *testing.T, r *Release, want string) {
	t.Helper()
	var paths []string
	for _, f := range r.Sources {
		paths = append(paths, f.Path)
	}
	if got := strings.Join(paths, " "); got != want {
		t.Errorf("source paths %q, want %q", got, want)
	}
}

// configMapVolume lays files out in dir as the kubelet mounts a ConfigMap
// volume: the data in a timestamped directory, "..data" linking to it, and
// each top-level entry (file or directory of nested items) a link through
// "..data".
func configMapVolume(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	const stamp = "..2026_12_01_00_00_00.123456789"
	writeTree(t, filepath.Join(dir, stamp), files)
	symlink(t, stamp, filepath.Join(dir, "..data"))
	top := map[string]bool{}
	for p := range files {
		top[strings.SplitN(p, "/", 2)[0]] = true
	}
	for name := range top {
		symlink(t, filepath.Join("..data", name), filepath.Join(dir, name))
	}
}

// A release locked from a plain directory loads from a ConfigMap volume of
// the same files: the links keep the names the kustomization used, so the
// source and render digests are the lock's.
func TestLoadReleaseFromConfigMapVolume(t *testing.T) {
	files := linkedRelease()
	plain := t.TempDir()
	writeTree(t, plain, files)
	fs := filesys.MakeFsOnDisk()
	r, err := Render(fs, plain, Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewLock(r, "1.0.0", testClusterIdentity, "v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	data, err := l.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	files[LockFile] = string(data)

	vol := t.TempDir()
	configMapVolume(t, vol, files)
	got, _, err := LoadRelease(fs, vol, Options{})
	if err != nil {
		t.Fatalf("load from a ConfigMap volume: %v", err)
	}
	if got.SourceDigest != r.SourceDigest || got.RenderDigest != r.RenderDigest {
		t.Errorf("digests from the volume (source %s, render %s), want the plain directory's (%s, %s)",
			got.SourceDigest, got.RenderDigest, r.SourceDigest, r.RenderDigest)
	}
	wantSourcePaths(t, got, "base/app.yaml base/kustomization.yaml kustomization.yaml namespace.yaml")
}

// A link leading out of the release is resolved, as before: kustomize's
// root-only load restriction refuses a file read through it.
func TestRenderRefusesFileLinkOutOfRelease(t *testing.T) {
	files := linkedRelease()
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"namespace.yaml": files["namespace.yaml"]})
	delete(files, "namespace.yaml")
	dir := t.TempDir()
	writeTree(t, dir, files)
	symlink(t, filepath.Join(outside, "namespace.yaml"), filepath.Join(dir, "namespace.yaml"))
	_, err := Render(filesys.MakeFsOnDisk(), dir, Options{})
	wantInvalid(t, err, "security; file", "is not in or below")
}

// A directory link to an ancestor is kustomize's cycle, refused at once, not
// followed until the path grows too long.
func TestRenderRefusesDirectoryLinkCycle(t *testing.T) {
	files := linkedRelease()
	files["kustomization.yaml"] = "namespace: demo\nresources:\n- namespace.yaml\n- base\n- a/b\n"
	dir := t.TempDir()
	writeTree(t, dir, files)
	if err := os.Mkdir(filepath.Join(dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	symlink(t, "..", filepath.Join(dir, "a", "b"))
	start := time.Now()
	_, err := Render(filesys.MakeFsOnDisk(), dir, Options{})
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("refusing the cycle took %s, want under 10s", took)
	}
	wantInvalid(t, err, "cycle detected")
}

// One file reached by two names inside the release is listed once, under
// the bytewise-smallest name.
func TestRenderNamesFileByItsSmallestName(t *testing.T) {
	files := linkedRelease()
	files["kustomization.yaml"] += "configMapGenerator:\n- name: twice\n  files:\n  - n=namespace.yaml\n  - a=a.yaml\n"
	dir := t.TempDir()
	writeTree(t, dir, files)
	symlink(t, "namespace.yaml", filepath.Join(dir, "a.yaml"))
	r, err := Render(filesys.MakeFsOnDisk(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// namespace.yaml is read first (resources come before generators).
	wantSourcePaths(t, r, "a.yaml base/app.yaml base/kustomization.yaml kustomization.yaml")
}
