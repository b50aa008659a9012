package deploy_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/qinglong/kubectl-ql3/ceremony/deploy"
	"github.com/qinglong/kubectl-ql3/internal/fail"
	"github.com/qinglong/kubectl-ql3/inventory"
	"github.com/qinglong/kubectl-ql3/receipts"
)

// An upgrade that moves a custom resource to a new served version of its
// CRD keeps the object (identity is group, kind, namespace and name). The
// Gadget ql3-gadget is installed as demo.qinglong.io/v1beta1 (3.2.0, the CRD
// serving v1beta1 only), upgraded to v1 (3.3.0, the CRD serving both,
// conversion None), upgraded back to v1beta1 (3.4.0), then rolled back to
// 3.3.0, which returns it to v1. Each transition commits, the Head records
// the exact apiVersion applied, and the receipts audit as one chain.
func TestIdentityAcrossVersions(t *testing.T) {
	ns := targetNamespace(t)
	beta := release(t, "v3.2.0-gadget-v1beta1", ns, "")
	v1 := release(t, "v3.3.0-gadget-v1", ns, "")
	// 3.4.0: 3.3.0's CRD, the Gadget written as v1beta1 again.
	back := release(t, "v3.3.0-gadget-v1", ns, "3.4.0")
	editReleaseFile(t, back, "gadget.yaml", "3.4.0", func(g string) string {
		return strings.Replace(g, "demo.qinglong.io/v1\n", "demo.qinglong.io/v1beta1\n", 1)
	})

	rdir := t.TempDir()
	o := options(t, cluster(t, userConfig(t, "ivy", "system:masters")), rdir)
	gadget := func(apiVersion string) inventory.Identity {
		return inventory.Identity{APIVersion: apiVersion, Kind: "Gadget", Namespace: ns, Name: "ql3-gadget"}
	}
	const betaVersion, v1Version = "demo.qinglong.io/v1beta1", "demo.qinglong.io/v1"
	// records checks that h lists the Gadget under want only.
	records := func(h *deploy.Head, want, not string) {
		t.Helper()
		if !slices.Contains(h.Current.Inventory, gadget(want)) || slices.Contains(h.Current.Inventory, gadget(not)) {
			t.Fatalf("generation %d inventory does not record the Gadget as %s only: %v", h.Generation, want, h.Current.Inventory)
		}
	}

	r1 := deployRelease(t, o, beta, deploy.TransitionInstall, deploy.ExpectedHead{})
	h1 := headOf(t, ns)
	if r1.Outcome != "committed" || h1.Generation != 1 {
		t.Fatalf("after install: %+v", r1)
	}
	records(h1, betaVersion, v1Version)
	assertGadget(t, ns, "v1beta1")

	r2 := deployRelease(t, o, v1, deploy.TransitionUpgrade, h1.Expected())
	h2 := headOf(t, ns)
	if r2.Outcome != "committed" || h2.Generation != 2 || h2.Current.Version != "3.3.0" {
		t.Fatalf("after upgrade to v1: result %+v, head generation %d version %s", r2, h2.Generation, h2.Current.Version)
	}
	// The Head records the apiVersion applied, so its inventory digest
	// moves; the objects are the same.
	records(h2, v1Version, betaVersion)
	if h2.Current.InventoryDigest == h1.Current.InventoryDigest || !inventory.SameObjects(h1.Current.Inventory, h2.Current.Inventory) {
		t.Fatalf("inventories: digests %s -> %s, same objects %t", h1.Current.InventoryDigest, h2.Current.InventoryDigest, inventory.SameObjects(h1.Current.Inventory, h2.Current.Inventory))
	}
	assertGadget(t, ns, "v1")

	deployRelease(t, o, back, deploy.TransitionUpgrade, h2.Expected())
	h3 := headOf(t, ns)
	if h3.Generation != 3 || h3.Current.Version != "3.4.0" {
		t.Fatalf("after upgrade back to v1beta1: head generation %d version %s", h3.Generation, h3.Current.Version)
	}
	records(h3, betaVersion, v1Version)
	assertGadget(t, ns, "v1beta1")

	// The rollback returns the Gadget to v1: allowed, because the objects
	// compare by key, though the inventory digests differ.
	r4 := deployRelease(t, o, v1, deploy.TransitionRollback, h3.Expected())
	h4 := headOf(t, ns)
	if r4.Outcome != "committed" || h4.Generation != 4 || h4.Transition.Kind != "rollback" || h4.Current.Deployment != h2.Current.Deployment {
		t.Fatalf("after rollback: result %+v, head %+v", r4, h4.Current.Deployment)
	}
	records(h4, v1Version, betaVersion)
	assertGadget(t, ns, "v1")

	rep, err := receipts.Audit([]string{rdir}, receipts.AuditOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || len(rep.Receipts) != 4 {
		t.Fatalf("audit of %s: %+v %+v", rdir, rep.Chain, rep.Receipts)
	}
	rc2, rc4 := readReceipt(t, r2.Receipt), readReceipt(t, r4.Receipt)
	if !slices.Contains(rc2.Inventory, gadget(v1Version)) || rc4.Deployment != rc2.Deployment || rc4.PreviousDeployment.InventoryDigest == rc4.Deployment.InventoryDigest {
		t.Fatalf("receipts: upgrade inventory %v, rollback deployment %+v previous %+v", rc2.Inventory, rc4.Deployment, rc4.PreviousDeployment)
	}
}

// assertGadget checks that ql3-gadget in ns was last applied by the
// ceremony's field manager under demo.qinglong.io/<version>.
func assertGadget(t *testing.T, ns, version string) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "demo.qinglong.io", Version: version, Resource: "gadgets"}
	u, err := dyn.Resource(gvr).Namespace(ns).Get(context.Background(), "ql3-gadget", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get gadget as %s: %v", version, err)
	}
	if teeth, _, _ := unstructured.NestedInt64(u.Object, "spec", "teeth"); teeth != 12 {
		t.Fatalf("gadget spec.teeth = %d, want 12", teeth)
	}
	for _, mf := range u.GetManagedFields() {
		if mf.Manager == inventory.FieldManager && mf.Operation == metav1.ManagedFieldsOperationApply && mf.APIVersion == "demo.qinglong.io/"+version {
			return
		}
	}
	t.Fatalf("gadget has no apply by %s as demo.qinglong.io/%s: %+v", inventory.FieldManager, version, u.GetManagedFields())
}

// A lock that lists the Head is refused by the preflight (it loads the
// release through inventory.LoadRelease) as invalid input, before any
// write.
func TestIdentityHeadReservedInLock(t *testing.T) {
	ns := targetNamespace(t)
	dir := release(t, "v3.0.0", ns, "")
	p := filepath.Join(dir, inventory.LockFile)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	l, err := inventory.ParseLock(data)
	if err != nil {
		t.Fatal(err)
	}
	l.Render.Inventory = append(l.Render.Inventory, inventory.Identity{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: inventory.HeadName})
	inventory.SortIdentities(l.Render.Inventory)
	l.Render.Count = len(l.Render.Inventory)
	if l.Render.InventoryDigest, err = inventory.InventoryDigest(l.Render.Inventory); err != nil {
		t.Fatal(err)
	}
	if data, err = l.Marshal(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	user := "head-lock-" + ns
	o := options(t, cluster(t, userConfig(t, user, "system:masters")), t.TempDir())
	_, err = deploy.RunPreflight(context.Background(), o, deploy.PreflightRequest{
		Dir: dir, Transition: deploy.TransitionInstall, Out: filepath.Join(t.TempDir(), "pf.json"),
	})
	if !fail.Is(err, fail.Invalid) || !strings.Contains(err.Error(), `"v1/ConfigMap/`+ns+`/qinglong3-deployment-head" is the Head`) {
		t.Fatalf("preflight of a lock listing the Head: %v (class %v)", err, fail.ClassOf(err))
	}
	assertNoWrites(t, user, "")
}
