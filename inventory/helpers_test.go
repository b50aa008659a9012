package inventory

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/internal/fail"
)

const (
	testImage  = "registry.k8s.io/pause:3.10@sha256:ee6521f290b2168b6e0935a181d4cff9be1ac3f505666ef0e3c98fae8199917a"
	testImage2 = "registry.k8s.io/pause:3.10.1@sha256:c204928bc0cb6e2054f8063f63ad2431ae024aca123d368b3268d305a0645db5"
)

var testClusterIdentity = ClusterIdentity("00000000-0000-4000-8000-000000000000")

// deployment is a workload manifest with a role label and one container.
func deployment(name, namespace, role, image string) string {
	ns := ""
	if namespace != "" {
		ns = "\n  namespace: " + namespace
	}
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %s%s
  labels:
    qinglong.io/role: %s
spec:
  replicas: 0
  selector:
    matchLabels: {app: %s}
  template:
    metadata:
      labels: {app: %s}
    spec:
      containers:
      - name: main
        image: %s
`, name, ns, role, name, name, image)
}

// minimalRelease is the smallest lockable release: a namespace and one
// workload per production role, under /rel.
func minimalRelease() map[string]string {
	var app []string
	for _, role := range ProductionRoles() {
		app = append(app, deployment("ql3-"+role, "", role, testImage))
	}
	return map[string]string{
		"/rel/kustomization.yaml": "namespace: demo\nresources:\n- namespace.yaml\n- app.yaml\n",
		"/rel/namespace.yaml":     "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: demo\n",
		"/rel/app.yaml":           strings.Join(app, "---\n"),
	}
}

// memFS builds an in-memory file system holding files.
func memFS(t testing.TB, files map[string]string) filesys.FileSystem {
	t.Helper()
	fs := filesys.MakeFsInMemory()
	for p, data := range files {
		if err := fs.MkdirAll(filepath.Dir(p)); err != nil {
			t.Fatal(err)
		}
		if err := fs.WriteFile(p, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	return fs
}

// fixtureFS copies testdata/releases/<name> into an in-memory file system
// at /rel.
func fixtureFS(t testing.TB, name string) filesys.FileSystem {
	t.Helper()
	dir := filepath.Join("..", "testdata", "releases", name)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files["/rel/"+e.Name()] = string(data)
	}
	return memFS(t, files)
}

func mustRender(t testing.TB, fs filesys.FileSystem, opts Options) *Release {
	t.Helper()
	r, err := Render(fs, "/rel", opts)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return r
}

// wantInvalid fails unless err is fail.Invalid and mentions every want.
func wantInvalid(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one mentioning %q", want)
	}
	if !fail.Is(err, fail.Invalid) {
		t.Errorf("class %s, want invalid: %v", fail.ClassOf(err), err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not mention %q:\n%v", w, err)
		}
	}
}
