package inventory

import (
	"bytes"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/internal/testcluster"
)

// TestKubectlKustomizeParity renders every fixture in-process and with the
// real `kubectl kustomize` (the one built with the test control plane,
// found as testcluster finds it), and compares the objects. A missing kubectl is a
// failure: build it (see the Makefile) rather than skip the comparison.
func TestKubectlKustomizeParity(t *testing.T) {
	binDir, err := testcluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	kubectlPath := filepath.Join(binDir, "kubectl")
	for _, f := range []string{"v3.0.0", "v3.1.0", "v3.1.1", "v3.1.0-drop"} {
		t.Run(f, func(t *testing.T) {
			compareWithKubectlKustomize(t, kubectlPath, filepath.Join("..", "testdata", "releases", f))
		})
	}
}

// compareWithKubectlKustomize renders dir with `kubectl kustomize` and with
// Render, and fails unless both give the same objects.
func compareWithKubectlKustomize(t *testing.T, kubectlPath, dir string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(kubectlPath, "kustomize", dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s kustomize %s: %v\n%s", kubectlPath, dir, err, stderr.Bytes())
	}
	var theirs []map[string]any
	dec := utilyaml.NewYAMLOrJSONDecoder(&stdout, 4096)
	for {
		var u unstructured.Unstructured
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(u.Object) > 0 {
			theirs = append(theirs, u.Object)
		}
	}
	slices.SortFunc(theirs, func(a, b map[string]any) int { return Compare(identityOf(a), identityOf(b)) })

	r, err := Render(filesys.MakeFsOnDisk(), dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ours []map[string]any
	for _, o := range r.Objects {
		ours = append(ours, o.Object)
	}
	// Compare canonical JSON: both sides decode numbers their own way.
	if diff := cmp.Diff(canonicalEach(t, theirs), canonicalEach(t, ours)); diff != "" {
		t.Errorf("kubectl kustomize (-) vs Render (+):\n%s", diff)
	}
}

func identityOf(o map[string]any) Identity {
	u := unstructured.Unstructured{Object: o}
	return Identity{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
}

func canonicalEach(t *testing.T, objs []map[string]any) []string {
	t.Helper()
	out := make([]string, len(objs))
	for i, o := range objs {
		c, err := Canonical(o)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = string(c)
	}
	return out
}
