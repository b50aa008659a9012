package inventory

import "testing"

// TakeObjects hands over the objects and leaves the release holding none
// of them (neither Objects nor the RedactedObjects that share them), its
// digests and inventory as they were.
func TestTakeObjectsLetsEveryObjectGo(t *testing.T) {
	files := map[string]string{
		"/rel/kustomization.yaml": "resources:\n- cm.yaml\n",
		"/rel/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: ns\ndata:\n  k: v\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  namespace: ns\n",
	}
	r, err := Render(memFS(t, files), "/rel", Options{})
	if err != nil {
		t.Fatal(err)
	}
	before := *r
	objs := r.TakeObjects()
	if len(objs) != 2 || objs[0] != before.Objects[0] || objs[1] != before.Objects[1] {
		t.Fatalf("TakeObjects = %v, want the release's two objects", objs)
	}
	if r.Objects != nil || r.RedactedObjects() != nil {
		t.Errorf("after TakeObjects the release still holds objects: %d, %d redacted", len(r.Objects), len(r.RedactedObjects()))
	}
	if r.RenderDigest != before.RenderDigest || r.InventoryDigest != before.InventoryDigest || len(r.Inventory) != 2 {
		t.Errorf("TakeObjects changed the digests or inventory: %+v", r)
	}
}
