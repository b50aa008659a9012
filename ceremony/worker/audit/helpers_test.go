package audit

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/qinglong/kubectl-ql3/inventory"
)

type objects struct{ list []*unstructured.Unstructured }

func renderObjs(t *testing.T, dir string) *objects {
	t.Helper()
	rel, err := inventory.Render(filesys.MakeFsOnDisk(), "testdata/"+dir, inventory.Options{UnpinnedImages: true, AllowSecretData: true})
	if err != nil {
		t.Fatal(err)
	}
	return &objects{list: rel.Objects}
}

func (o *objects) dep(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	for _, u := range o.list {
		if u.GetKind() == "Deployment" {
			return u
		}
	}
	t.Fatal("no Deployment")
	return nil
}

func (o *objects) template(t *testing.T) map[string]string {
	t.Helper()
	m, _, err := unstructured.NestedStringMap(o.dep(t).Object, "spec", "template", "metadata", "annotations")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (o *objects) setTemplate(t *testing.T, ann map[string]string) {
	t.Helper()
	if err := unstructured.SetNestedStringMap(o.dep(t).Object, ann, "spec", "template", "metadata", "annotations"); err != nil {
		t.Fatal(err)
	}
}
