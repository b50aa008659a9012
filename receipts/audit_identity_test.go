package receipts

import (
	"strings"
	"testing"

	"github.com/qinglong/kubectl-ql3/inventory/canon"
)

// withInventory sets the receipt's inventory (sorted) and the deployment's
// count and digest computed from it.
func (b *rb) withInventory(ids ...canon.Identity) *rb {
	b.r.Inventory = append([]canon.Identity{}, ids...)
	canon.SortIdentities(b.r.Inventory)
	b.r.Deployment.InventoryCount = len(ids)
	b.r.Deployment.InventoryDigest, _ = canon.InventoryDigest(b.r.Inventory)
	return b
}

// The chain's upgrade and rollback rules compare objects by group, kind,
// namespace and name: an object that moves to another apiVersion is kept.
func TestAuditIdentityAcrossVersions(t *testing.T) {
	obj := func(apiVersion, kind, name string) canon.Identity {
		return canon.Identity{APIVersion: apiVersion, Kind: kind, Namespace: "ql3", Name: name}
	}
	cmA, cmB, cmC := obj("v1", "ConfigMap", "a"), obj("v1", "ConfigMap", "b"), obj("v1", "ConfigMap", "c")
	gadgetBeta, gadgetV1 := obj("demo.qinglong.io/v1beta1", "Gadget", "g"), obj("demo.qinglong.io/v1", "Gadget", "g")
	gadgetOther := obj("other.qinglong.io/v1", "Gadget", "g")
	hpa1, hpa2 := obj("autoscaling/v1", "HorizontalPodAutoscaler", "web"), obj("autoscaling/v2", "HorizontalPodAutoscaler", "web")

	type step struct {
		kind, version string // version "" for a rollback
		inv           []canon.Identity
	}
	tests := []struct {
		name  string
		steps []step
		want  string // "" = the chain audits ok
	}{
		{"custom resource moves v1beta1 to v1 and back", []step{
			{KindInstall, "3.0.0", []canon.Identity{cmA, gadgetBeta}},
			{KindUpgrade, "3.1.0", []canon.Identity{cmA, gadgetV1}},
			{KindRollback, "", []canon.Identity{cmA, gadgetBeta}},
		}, ""},
		{"hpa moves to autoscaling/v2, then an object is added", []step{
			{KindInstall, "3.0.0", []canon.Identity{cmA, hpa1}},
			{KindUpgrade, "3.1.0", []canon.Identity{cmA, hpa2}},
			{KindUpgrade, "3.2.0", []canon.Identity{cmA, cmB, hpa2}},
		}, ""},
		{"upgrade drops an object", []step{
			{KindInstall, "3.0.0", []canon.Identity{cmA, cmB}},
			{KindUpgrade, "3.1.0", []canon.Identity{cmA}},
		}, "generation 2: upgrade drops 1 object(s) of generation 1, and kubectl-ql3 never prunes: v1/ConfigMap/ql3/b"},
		{"upgrade moves a kind to another group", []step{
			{KindInstall, "3.0.0", []canon.Identity{cmA, gadgetV1}},
			{KindUpgrade, "3.1.0", []canon.Identity{cmA, gadgetOther}},
		}, "generation 2: upgrade drops 1 object(s) of generation 1, and kubectl-ql3 never prunes: demo.qinglong.io/v1/Gadget/ql3/g"},
		{"rollback with as many objects, but others", []step{
			{KindInstall, "3.0.0", []canon.Identity{cmA, cmB}},
			{KindUpgrade, "3.1.0", []canon.Identity{cmA, cmB}},
			{KindUpgrade, "3.2.0", []canon.Identity{cmA, cmC}},
			{KindRollback, "", []canon.Identity{cmA, cmB}},
		}, "generation 4: rollback changes the objects of generation 3: it drops v1/ConfigMap/ql3/c and adds v1/ConfigMap/ql3/b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rs []*Receipt
			for i, s := range tt.steps {
				var b *rb
				if i == 0 {
					b = newReceipt().version(s.version)
				} else {
					b = following(rs[i-1], s.kind, s.version)
				}
				rs = append(rs, b.withInventory(s.inv...).sealed(t))
			}
			dir := t.TempDir()
			writeChain(t, dir, rs)
			rep := mustAudit(t, []string{dir}, AuditOptions{})
			got := failures(rep)
			switch {
			case tt.want == "" && !rep.OK():
				t.Fatalf("audit failed:\n%s", got)
			case tt.want != "" && rep.OK():
				t.Fatalf("audit passed, want %q", tt.want)
			case !strings.Contains(got, tt.want):
				t.Fatalf("reasons do not mention %q:\n%s", tt.want, got)
			}
		})
	}
}
